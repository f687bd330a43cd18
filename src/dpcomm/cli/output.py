"""What several commands print the same way: aligned tables and progress bars."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> None:
    """``header`` and ``rows``, every column right-aligned to its widest cell, after ``indent``."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    for line in [header, *rows]:
        print(indent + "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars: on when standard error is a terminal, unless ``--quiet``."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()
