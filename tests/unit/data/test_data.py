import gzip
import itertools
import math
from importlib import resources

import numpy as np
import pytest
from scipy import stats
from tests.conftest import idx_bytes, write_idx

from dpcomm.data import (
    ImageDataset,
    diabetes_table,
    generate_diabetes,
    load_fashion_mnist,
    load_idx_directory,
    load_image_dataset,
    load_mnist5k,
    read_idx,
    synthetic_table,
    zipf_probabilities,
)
from dpcomm.errors import DpcommError, InvalidParameterError

# ---------------------------------------------------------------- synthetic


def test_synthetic_shapes_types_and_ranges():
    table = synthetic_table(num_rows=1000, seed=1)
    assert table.name == "synthetic"
    assert table.column_names == ("g1", "g2", "g3", "g4", "m1", "m2")
    assert table.num_rows == 1000
    for name in ("g1", "g2", "g3", "g4"):
        column = table.column(name)
        assert column.sql_type == "BIGINT"
        assert column.values.dtype == np.int64
        assert column.values.min() >= 0 and column.values.max() <= 19
        assert not column.is_null.any()
    for name in ("m1", "m2"):
        column = table.column(name)
        assert column.sql_type == "DOUBLE"
        assert column.values.dtype == np.float64
        assert np.isfinite(column.values).all()
    assert (table.column("m2").values > 0).all()  # lognormal


def test_synthetic_custom_shape():
    table = synthetic_table(
        num_rows=50,
        distribution="zipf",
        num_grouping_columns=2,
        num_intervals=3,
        num_measures=3,
        seed=0,
        name="t",
    )
    assert table.name == "t"
    assert table.column_names == ("g1", "g2", "m1", "m2", "m3")
    assert set(np.unique(table.column("g2").values)) <= {0, 1, 2}


def test_synthetic_single_row_and_no_measure():
    table = synthetic_table(num_rows=1, num_measures=0, num_intervals=1, seed=3)
    assert table.num_rows == 1
    assert table.column_names == ("g1", "g2", "g3", "g4")
    assert table.column("g1").values.tolist() == [0]


@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_synthetic_is_reproducible(distribution):
    first = synthetic_table(num_rows=500, distribution=distribution, seed=42)
    again = synthetic_table(num_rows=500, distribution=distribution, seed=42)
    other = synthetic_table(num_rows=500, distribution=distribution, seed=43)
    for a, b, c in zip(first.columns, again.columns, other.columns, strict=True):
        assert np.array_equal(a.values, b.values)
        assert not np.array_equal(a.values, c.values)


def test_synthetic_accepts_a_generator():
    # A Generator gives the integer seed it draws first (the table is drawn per block, each
    # block by its own generator seeded by that integer and the block's index).
    a = synthetic_table(num_rows=100, seed=np.random.default_rng(5))
    b = synthetic_table(num_rows=100, seed=int(np.random.default_rng(5).integers(1 << 63)))
    assert np.array_equal(a.column("m1").values, b.column("m1").values)


def test_synthetic_uniform_passes_chi_square():
    table = synthetic_table(num_rows=100_000, distribution="uniform", seed=7)
    for name in ("g1", "g2", "g3", "g4"):
        counts = np.bincount(table.column(name).values, minlength=20)
        assert stats.chisquare(counts).pvalue > 1e-6


def test_synthetic_zipf_is_biased_and_differs_per_column():
    rows = 100_000
    table = synthetic_table(num_rows=rows, distribution="zipf", zipf_exponent=1.2, seed=7)
    expected = zipf_probabilities(num_intervals=20, exponent=1.2)
    tops = []
    for name in ("g1", "g2", "g3", "g4"):
        counts = np.bincount(table.column(name).values, minlength=20)
        assert stats.chisquare(counts).pvalue < 1e-100  # far from uniform
        frequencies = np.sort(counts)[::-1] / rows
        assert np.allclose(frequencies, expected, atol=0.01)
        tops.append(int(np.argmax(counts)))
    assert len(set(tops)) > 1  # each column ranks the intervals differently


def test_zipf_probabilities():
    p = zipf_probabilities(num_intervals=20, exponent=1.0)
    assert math.isclose(p.sum(), 1.0)
    assert math.isclose(p[0] / p[1], 2.0) and math.isclose(p[0] / p[9], 10.0)


def test_synthetic_group_averages_differ():
    table = synthetic_table(num_rows=20_000, seed=11)
    g1, m1 = table.column("g1").values, table.column("m1").values
    g2, m2 = table.column("g2").values, table.column("m2").values
    assert m1[g1 == 19].mean() - m1[g1 == 0].mean() > 40
    assert np.median(m2[g2 == 19]) / np.median(m2[g2 == 0]) > 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_rows": 0}, "rows"),
        ({"num_rows": 2.5}, "rows"),
        ({"num_rows": True}, "rows"),
        ({"num_rows": 10, "distribution": "biased"}, "distribution"),
        ({"num_rows": 10, "num_grouping_columns": 0}, "num_grouping_columns"),
        ({"num_rows": 10, "num_intervals": 0}, "num_intervals"),
        ({"num_rows": 10, "num_measures": -1}, "num_measures"),
        ({"num_rows": 10, "zipf_exponent": 0}, "zipf_exponent"),
        ({"num_rows": 10, "zipf_exponent": math.nan}, "zipf_exponent"),
        ({"num_rows": 10, "seed": -1}, "seed"),
        ({"num_rows": 10, "seed": 1.5}, "seed"),
    ],
)
def test_synthetic_rejects_bad_input(kwargs, name):
    kwargs.setdefault("seed", 0)
    with pytest.raises(InvalidParameterError) as caught:
        synthetic_table(**kwargs)
    assert caught.value.name == name
    message = str(caught.value)
    assert name in message and "expected" in message and "\n" not in message


# ---------------------------------------------------------------- diabetes


def test_diabetes_table_loads():
    table = diabetes_table()
    assert table.name == "diabetes"
    assert table.num_rows == 10_000
    assert table.column_names == ("A", "B", "I")
    assert [c.sql_type for c in table.columns] == ["BIGINT", "BIGINT", "DOUBLE"]
    assert set(np.unique(table.column("A").values)) <= {20, 30, 40, 50, 60, 70, 80}
    assert set(np.unique(table.column("B").values)) <= {15, 20, 25, 30, 35, 40, 45}
    insulin = table.column("I").values
    assert insulin.min() >= 1.0 and insulin.max() <= 300.0
    assert np.allclose(insulin, np.round(insulin, 1))


def test_diabetes_csv_is_what_the_generator_makes():
    shipped = diabetes_table()
    generated = generate_diabetes()
    for a, b in zip(shipped.columns, generated.columns, strict=True):
        assert a.name == b.name and a.sql_type == b.sql_type
        assert np.array_equal(a.values, b.values)
    resource = resources.files("dpcomm.data").joinpath("diabetes.csv")
    assert len(resource.read_bytes()) < 300_000


def test_diabetes_group_averages_differ():
    table = diabetes_table()
    bmi, insulin = table.column("B").values, table.column("I").values
    averages = [insulin[bmi == band].mean() for band in (15, 20, 25, 30, 35)]
    assert all(x < y for x, y in itertools.pairwise(averages))
    age = table.column("A").values
    assert insulin[age == 80].mean() > insulin[age == 20].mean()


def test_generate_diabetes_small_and_reproducible():
    a = generate_diabetes(num_rows=5, seed=1)
    b = generate_diabetes(num_rows=5, seed=1)
    assert a.num_rows == 5
    assert all(
        np.array_equal(x.values, y.values) for x, y in zip(a.columns, b.columns, strict=True)
    )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"num_rows": 0}, "rows"), ({"num_rows": 1.5}, "rows"), ({"seed": -3}, "seed")],
)
def test_generate_diabetes_rejects_bad_input(kwargs, name):
    with pytest.raises(InvalidParameterError) as caught:
        generate_diabetes(**kwargs)
    assert caught.value.name == name


# ---------------------------------------------------------------- IDX files


def write_directory(directory, *, gz, train=7, test=3, shape=(4, 5), seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (train, *shape)),
        "train-labels-idx1-ubyte": rng.integers(0, 10, train),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (test, *shape)),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, test),
    }
    for stem, array in arrays.items():
        write_idx(directory / (stem + (".gz" if gz else "")), array)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_idx_directory_round_trip(tmp_path, gz):
    arrays = write_directory(tmp_path, gz=gz)
    dataset = load_idx_directory(tmp_path)
    assert dataset.name == str(tmp_path)
    assert dataset.image_shape == (4, 5)
    assert dataset.num_features == 20
    assert dataset.train_images.dtype == np.float64 and dataset.train_labels.dtype == np.int64
    assert np.array_equal(dataset.train_images, arrays["train-images-idx3-ubyte"].reshape(7, 20))
    assert np.array_equal(dataset.train_labels, arrays["train-labels-idx1-ubyte"])
    assert np.array_equal(dataset.test_images, arrays["t10k-images-idx3-ubyte"].reshape(3, 20))
    assert np.array_equal(dataset.test_labels, arrays["t10k-labels-idx1-ubyte"])
    assert np.array_equal(load_image_dataset(tmp_path).test_labels, dataset.test_labels)
    assert np.array_equal(load_image_dataset(str(tmp_path)).train_labels, dataset.train_labels)


@pytest.mark.parametrize(
    ("type_code", "dtype"),
    [(0x08, ">u1"), (0x09, ">i1"), (0x0B, ">i2"), (0x0C, ">i4"), (0x0D, ">f4"), (0x0E, ">f8")],
)
def test_read_idx_element_types(tmp_path, type_code, dtype):
    array = np.arange(24).reshape(2, 3, 4) - (0 if dtype == ">u1" else 5)
    path = tmp_path / "x.idx"
    write_idx(path, array, type_code=type_code, dtype=dtype)
    read = read_idx(path)
    assert read.shape == (2, 3, 4)
    assert read.dtype.isnative
    assert np.array_equal(read, array)
    read[0, 0, 0] = 1  # writable


def test_read_idx_rejects_bad_magic(tmp_path):
    path = tmp_path / "bad"
    path.write_bytes(b"\x01\x02\x08\x01\x00\x00\x00\x01\x05")
    with pytest.raises(DpcommError, match="not an IDX file") as caught:
        read_idx(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_read_idx_rejects_unknown_type_and_empty(tmp_path):
    path = tmp_path / "bad"
    path.write_bytes(b"\x00\x00\x07\x01\x00\x00\x00\x01\x05")
    with pytest.raises(DpcommError, match="not an IDX file"):
        read_idx(path)
    path.write_bytes(b"")
    with pytest.raises(DpcommError, match="magic number missing"):
        read_idx(path)


def test_read_idx_rejects_truncated_header(tmp_path):
    path = tmp_path / "short"
    path.write_bytes(b"\x00\x00\x08\x03\x00\x00\x00\x02")
    with pytest.raises(DpcommError, match="header truncated"):
        read_idx(path)


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_rejects_truncated_data(tmp_path, gz):
    path = tmp_path / ("t.gz" if gz else "t")
    data = idx_bytes(np.zeros((3, 2, 2), dtype=np.uint8))[:-2]
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(DpcommError, match="truncated") as caught:
        read_idx(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_read_idx_rejects_trailing_bytes(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(idx_bytes(np.zeros(3, dtype=np.uint8)) + b"\x00")
    with pytest.raises(DpcommError, match="trailing bytes"):
        read_idx(path)


def test_read_idx_rejects_cut_gzip_stream(tmp_path):
    path = tmp_path / "t.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((50, 4, 4), dtype=np.uint8)))[:-10])
    with pytest.raises(DpcommError, match="cannot read") as caught:
        read_idx(path)
    assert "\n" not in str(caught.value)


def test_read_idx_missing_file(tmp_path):
    with pytest.raises(DpcommError, match="no such file"):
        read_idx(tmp_path / "nothing")


def test_idx_directory_mismatched_counts(tmp_path):
    write_directory(tmp_path, gz=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.zeros(4, dtype=np.uint8))
    with pytest.raises(DpcommError, match=r"has 4 labels but .* has 3 images") as caught:
        load_idx_directory(tmp_path)
    assert "t10k-labels-idx1-ubyte.gz" in str(caught.value)


def test_idx_directory_missing_file(tmp_path):
    write_directory(tmp_path, gz=False)
    (tmp_path / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(DpcommError, match=r"cannot find train-labels-idx1-ubyte or .*\.gz"):
        load_idx_directory(tmp_path)


def test_idx_directory_wrong_dimensions(tmp_path):
    write_directory(tmp_path, gz=False)
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((7, 20), dtype=np.uint8))
    with pytest.raises(DpcommError, match="expected 3 dimensions"):
        load_idx_directory(tmp_path)


def test_idx_directory_train_and_test_shapes_differ(tmp_path):
    write_directory(tmp_path, gz=False)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((3, 5, 4), dtype=np.uint8))
    with pytest.raises(DpcommError, match="training images are"):
        load_idx_directory(tmp_path)


def test_idx_directory_not_a_directory(tmp_path):
    with pytest.raises(DpcommError, match="not a directory"):
        load_idx_directory(tmp_path / "absent")


def test_fashion_mnist_missing_directory_says_make_data(tmp_path):
    with pytest.raises(DpcommError, match="make data") as caught:
        load_fashion_mnist(tmp_path / "absent")
    assert "\n" not in str(caught.value)


def test_load_image_dataset_rejects_unknown_spec(tmp_path):
    with pytest.raises(InvalidParameterError) as caught:
        load_image_dataset(str(tmp_path / "nowhere"))
    assert caught.value.name == "dataset"
    assert "mnist5k" in str(caught.value) and "fashion-mnist" in str(caught.value)


# ---------------------------------------------------------------- ImageDataset, mnist5k


def tiny_dataset(**overrides):
    fields = {
        "name": "tiny",
        "train_images": np.zeros((3, 4)),
        "train_labels": np.zeros(3, dtype=np.int64),
        "test_images": np.zeros((2, 4)),
        "test_labels": np.zeros(2, dtype=np.int64),
        "image_shape": (2, 2),
    }
    fields.update(overrides)
    return ImageDataset(**fields)


@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        ({"train_images": np.zeros((3, 5))}, "train_images"),
        ({"train_images": np.zeros((3, 4), dtype=np.uint8)}, "train_images"),
        ({"test_images": np.zeros(4)}, "test_images"),
        ({"train_labels": np.zeros(2, dtype=np.int64)}, "train_labels"),
        ({"test_labels": np.zeros(2, dtype=np.int32)}, "test_labels"),
        ({"test_images": np.zeros((0, 4)), "test_labels": np.zeros(0, np.int64)}, "test_images"),
    ],
)
def test_image_dataset_validates(overrides, name):
    with pytest.raises(InvalidParameterError) as caught:
        tiny_dataset(**overrides)
    assert caught.value.name == name


def test_image_dataset_properties():
    dataset = tiny_dataset(test_labels=np.array([0, 3], dtype=np.int64))
    assert dataset.num_features == 4
    assert dataset.num_classes == 2


@pytest.fixture(scope="module")
def mnist5k():
    return load_mnist5k()


def test_mnist5k_stratified_split(mnist5k):
    assert mnist5k.name == "mnist5k"
    assert mnist5k.train_images.shape == (4000, 784)
    assert mnist5k.test_images.shape == (1000, 784)
    assert np.array_equal(np.bincount(mnist5k.test_labels), np.full(10, 100))
    assert np.array_equal(np.bincount(mnist5k.train_labels), np.full(10, 400))
    assert mnist5k.train_images.min() >= 0 and mnist5k.train_images.max() <= 255
    assert mnist5k.image_shape == (28, 28)


def test_mnist5k_is_reproducible_and_seeded(mnist5k):
    again = load_mnist5k(seed=0)
    other = load_mnist5k(seed=1, test_fraction=0.5)
    assert np.array_equal(again.test_images, mnist5k.test_images)
    assert other.test_images.shape == (2500, 784)
    assert not np.array_equal(other.test_images[:1000], mnist5k.test_images)
    assert load_image_dataset("mnist5k").test_images.shape == (1000, 784)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"test_fraction": 0.0}, "test_fraction"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"test_fraction": 0.0001}, "test_fraction"),
        ({"test_fraction": 0.9999}, "test_fraction"),
        ({"seed": -1}, "seed"),
    ],
)
def test_mnist5k_rejects_bad_input(kwargs, name):
    with pytest.raises(InvalidParameterError) as caught:
        load_mnist5k(**kwargs)
    assert caught.value.name == name


def test_write_diabetes_csv_rewrites_the_shipped_file_byte_for_byte(tmp_path):
    from dpcomm.data.diabetes import write_diabetes_csv

    path = tmp_path / "diabetes.csv"
    write_diabetes_csv(path)
    shipped = resources.files("dpcomm.data").joinpath("diabetes.csv").read_bytes()
    assert path.read_bytes() == shipped
