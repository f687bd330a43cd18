from pathlib import Path

import numpy as np
import pytest

from dpcomm.data import (
    diabetes_table,
    load_fashion_mnist,
    load_image_dataset,
    read_table,
    synthetic_table,
    write_table,
)
from dpcomm.data.images import FASHION_MNIST_DIRECTORY


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_synthetic_round_trips_through_files(tmp_path, suffix, distribution):
    table = synthetic_table(num_rows=5000, distribution=distribution, seed=3)
    path = tmp_path / f"synthetic.{suffix}"
    write_table(table, path)
    read = read_table(path, name="synthetic")
    assert read.column_names == table.column_names
    for original, back in zip(table.columns, read.columns, strict=True):
        assert back.sql_type == original.sql_type
        assert back.values.dtype == original.values.dtype
        assert np.array_equal(back.values, original.values)
        assert not back.is_null.any()


def test_diabetes_round_trips_through_parquet(tmp_path):
    table = diabetes_table()
    path = tmp_path / "diabetes.parquet"
    write_table(table, path)
    read = read_table(path, name="diabetes")
    for original, back in zip(table.columns, read.columns, strict=True):
        assert np.array_equal(back.values, original.values)


@pytest.fixture(scope="module")
def fashion():
    if not Path(FASHION_MNIST_DIRECTORY).is_dir():
        pytest.skip("dataset-fashion-mnist not installed (make data)")
    return load_fashion_mnist()


def test_fashion_mnist_shapes_and_labels(fashion):
    assert fashion.name == "fashion-mnist"
    assert fashion.train_images.shape == (60000, 784)
    assert fashion.test_images.shape == (10000, 784)
    assert fashion.train_images.dtype == np.float64
    assert fashion.image_shape == (28, 28)
    assert fashion.train_labels.dtype == np.int64
    assert np.array_equal(np.unique(fashion.train_labels), np.arange(10))
    assert np.array_equal(np.unique(fashion.test_labels), np.arange(10))
    # Fashion-MNIST is balanced: 6,000 training and 1,000 test images per class.
    assert np.array_equal(np.bincount(fashion.train_labels), np.full(10, 6000))
    assert np.array_equal(np.bincount(fashion.test_labels), np.full(10, 1000))
    assert fashion.train_images.min() == 0 and fashion.train_images.max() == 255


def test_fashion_mnist_by_name_and_by_directory(fashion):
    by_name = load_image_dataset("fashion-mnist")
    by_path = load_image_dataset(FASHION_MNIST_DIRECTORY)
    assert by_path.name == FASHION_MNIST_DIRECTORY
    assert np.array_equal(by_name.test_labels, fashion.test_labels)
    assert np.array_equal(by_path.test_images, fashion.test_images)
