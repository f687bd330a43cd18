"""``dpcomm figures``: regenerate the paper's figures (parse, call, print)."""

from __future__ import annotations

import argparse
from typing import Any

from dpcomm.cli.output import (
    add_progress_options,
    check_writable_folder,
    non_negative_int,
    show_progress,
)
from dpcomm.errors import require_extra


def command_figures(args: argparse.Namespace) -> int:
    """``dpcomm figures``."""
    from dpcomm.experiments.figures import FigureSettings, make_figures, select_figures, write_index

    require_extra("figures", "dpcomm figures")
    only = [name.strip() for name in args.only.split(",")] if args.only is not None else None
    names = select_figures(only)
    settings = FigureSettings(
        out_dir=check_writable_folder("--out", args.out),
        quick=args.quick,
        progress=show_progress(args),
        seed=args.seed,
    )
    outputs = make_figures(names, settings)
    for output, seconds in outputs:
        print(f"Figure {output.name:<3} {seconds:7.1f} s  {output.png}  {output.csv}")
    index = write_index(outputs, settings)
    print(f"index: {index}")
    return 0


def add_figures_command(commands: Any) -> None:
    """Register ``figures`` on the top-level subparsers."""
    figures = commands.add_parser(
        "figures",
        help="regenerate the paper's figures (PNG + CSV + index page)",
        description=(
            "Regenerate each figure of the paper from dpcomm's own code: a PNG, the CSV of the "
            "plotted numbers, and an index page (index.md) with the paper's captions."
        ),
    )
    figures.add_argument("--out", default="figures", help="output directory (default: figures)")
    figures.add_argument(
        "--only", help="comma-separated figure names (e.g. 3a,6b) or numbers (6 = 6a,6b,6c)"
    )
    figures.add_argument(
        "--quick", action="store_true", help="smaller grids and fewer runs (about two minutes)"
    )
    figures.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of every random part"
    )
    add_progress_options(figures)
    figures.set_defaults(handler=command_figures)
