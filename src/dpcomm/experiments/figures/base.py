"""What every figure of the paper is, once regenerated: a PNG, the CSV behind it, a caption.

A figure is a function ``make(settings) -> FigureOutput`` registered under its name (``3a``,
``6b``, ...). It writes ``<name>.png`` and ``<name>.csv`` into ``settings.out_dir``; the CSV holds
exactly the plotted numbers, one row per plotted point, with a column naming the curve.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dpcomm.errors import DpcommError, InvalidParameterError, require_extra
from dpcomm.plan.codec import countermeasure_to_dict
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.progress import with_progress

T = TypeVar("T")

#: One CSV row (one plotted point): column → value.
Row = dict[str, Any]

#: δ of every data-dependent cluster of the (ε, δ) figures (Table 1 of the paper).
DELTA = 1e-4
#: C = T, compute nodes per grouping set of the Aggregate figures (Table 1).
NUM_TARGETS = 20


@dataclass(frozen=True)
class FigureSettings:
    """How to make figures.

    Attributes:
        out_dir: where the PNG and CSV files go (created if missing).
        quick: smaller grids and fewer runs (the whole set in about two minutes).
        progress: show progress bars on long sweeps.
        seed: seed of every random part (simulations, Monte Carlo).
    """

    out_dir: Path
    quick: bool = False
    progress: bool = False
    seed: int = 0

    def steps(self, items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
        """Iterate over ``items``, with a progress bar when ``progress`` is on."""
        return with_progress(
            items, enabled=self.progress, description=description, unit="pt", total=total
        )


@dataclass(frozen=True)
class FigureOutput:
    """A regenerated figure.

    Attributes:
        name: its name (``3a``).
        title: one line (the paper's subcaption).
        caption: the paper's caption, and our parameters.
        png: path of the image.
        csv: path of the plotted numbers.
        notes: what a reader should know (estimates, skipped parts, comparison with the paper).
    """

    name: str
    title: str
    caption: str
    png: Path
    csv: Path
    notes: tuple[str, ...] = field(default_factory=tuple)


FigureMaker = Callable[[FigureSettings], FigureOutput]

#: Every figure, by name, in the order of the paper (filled by the figure modules).
REGISTRY: dict[str, FigureMaker] = {}


def register(name: str) -> Callable[[FigureMaker], FigureMaker]:
    """Decorator: register a figure maker under ``name``."""

    def decorate(maker: FigureMaker) -> FigureMaker:
        if name in REGISTRY:
            raise InvalidParameterError("figure name", "a name not yet registered", name)
        REGISTRY[name] = maker
        return maker

    return decorate


def group_curves(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Rows grouped by their ``curve`` column, in order of first appearance."""
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(str(row["curve"]), []).append(row)
    return grouped


def countermeasure_columns(countermeasure: Countermeasure) -> dict[str, Any]:
    """σ, n and d of ``countermeasure``, as a figure's CSV has them.

    From its dict form (`dpcomm.plan.codec.countermeasure_to_dict`); n is empty without
    scramblers.
    """
    form = countermeasure_to_dict(countermeasure)
    batch_size = form["batch_size"]
    return {
        "sampling_rate": form["sampling_rate"],
        "batch_size": "" if batch_size is None else batch_size,
        "num_dummies": form["num_dummies"],
    }


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write ``rows`` (dicts with the same keys) as CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def new_axes(*, width: float = 6.0, height: float = 4.0, panels: int = 1) -> tuple[Any, Any]:
    """A matplotlib figure and its axes (an array of ``panels`` side by side if more than one).

    On the non-interactive Agg backend.
    """
    require_extra("figures", "the paper's figures", ("matplotlib",))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, panels, figsize=(width, height), dpi=110)
    return figure, axes


def save_png(figure: Any, path: Path) -> None:
    """Save and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


#: The smallest legend font size a figure may use (points).
MIN_LEGEND_FONT = 7.0
#: The most entries one legend may have.
MAX_LEGEND_ENTRIES = 12


def readability_problems(figure: Any) -> list[str]:
    """What makes ``figure`` hard to read: no title, unlabelled axes, a missing or crowded legend.

    Every axes drawing more than one labelled line, bar or point set needs a legend (its own or
    the figure's) of at most `MAX_LEGEND_ENTRIES` entries in at least
    `MIN_LEGEND_FONT` points; every axes needs axis labels; the figure needs a title.
    """
    problems = []
    if not figure.get_suptitle().strip():
        problems.append("no figure title")
    legends = list(figure.legends)
    for index, axes in enumerate(figure.axes):
        if not axes.get_visible() or not axes.has_data():
            continue
        if not axes.get_xlabel() or not axes.get_ylabel():
            twin = any(
                other is not axes and other.bbox.bounds == axes.bbox.bounds for other in figure.axes
            )
            if not twin or not (axes.get_xlabel() or axes.get_ylabel()):
                problems.append(f"axes {index}: no axis label")
        _handles, labels = axes.get_legend_handles_labels()
        labelled = [label for label in labels if not label.startswith("_")]
        legend = axes.get_legend()
        if legend is not None:
            legends.append(legend)
        elif len(labelled) > 1 and not figure.legends:
            twins = [
                other.get_legend()
                for other in figure.axes
                if other is not axes and other.bbox.bounds == axes.bbox.bounds
            ]
            if not any(twins):
                problems.append(f"axes {index}: {len(labelled)} labelled series, no legend")
    for legend in legends:
        texts = legend.get_texts()
        if len(texts) > MAX_LEGEND_ENTRIES:
            problems.append(f"a legend of {len(texts)} entries")
        if texts and min(text.get_fontsize() for text in texts) < MIN_LEGEND_FONT:
            problems.append("a legend font below 7 pt")
    return problems


def save_figure(
    settings: FigureSettings,
    name: str,
    figure: Any,
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str,
) -> tuple[Path, Path]:
    """Title the figure ("Figure 3a: ..."), check it reads well, write the PNG and the CSV.

    Raises `DpcommError` naming what `readability_problems` finds.
    """
    figure.suptitle(f"Figure {name}: {title}", fontsize=11)
    problems = readability_problems(figure)
    if problems:
        raise DpcommError(f"figure {name} is hard to read: {'; '.join(problems)}")
    png = settings.out_dir / f"{name}.png"
    csv = settings.out_dir / f"{name}.csv"
    write_csv(csv, rows)
    save_png(figure, png)
    return png, csv
