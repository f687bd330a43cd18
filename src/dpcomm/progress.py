"""The optional progress bar of long loops (layer 0): off unless asked for (``progress=True``).

Library code never prints; a function that takes ``progress`` wraps its long loop in
`with_progress`, and the command line turns it on (tqdm, on standard error).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

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
