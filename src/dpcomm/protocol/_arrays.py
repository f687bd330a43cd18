"""Validators and array types shared by the protocol layer; each raises InvalidParameterError."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def as_index_array(name: str, values: npt.ArrayLike, *, upper: int) -> IntArray:
    """Return ``values`` as a 1-D int64 array whose entries lie in [0, upper)."""
    allowed = f"a 1-D array of integers in [0, {upper})"
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidParameterError(name, allowed, f"an array of shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise InvalidParameterError(name, allowed, f"an array of dtype {array.dtype}")
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= upper:
        raise InvalidParameterError(name, allowed, f"values in [{low}, {high}]")
    return array.astype(np.int64, copy=False)


def read_only(array: npt.NDArray[np.generic]) -> None:
    """Mark ``array`` read-only so that the frozen results that hold it stay immutable."""
    array.setflags(write=False)
