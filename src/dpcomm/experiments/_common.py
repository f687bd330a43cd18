"""What the experiments share: array types and progress bars."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

T = TypeVar("T")


def with_progress(
    items: Iterable[T], *, enabled: bool, description: str, unit: str, total: int | None = None
) -> Iterator[T]:
    """Iterate over ``items``, with a progress bar when ``enabled``."""
    if not enabled:
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, desc=description, total=total, leave=False, unit=unit)
