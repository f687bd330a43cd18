"""A configuration the planner can choose, and a feasible one with its costs.

A `Configuration` is a countermeasure of `dpcomm.plan` (local sampling + flooding,
or uncapped scramblers) for every data-dependent cluster of the plan, with the balanced batch
sizes its scramblers get for the sources recruited. A `PlanCandidate` is a feasible
configuration with its guarantee and its three costs (network load, channels, consents).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import balanced_batch_sizes
from dpcomm.plan.countermeasures import CountermeasureName, LocalFlooding, Scramblers


@dataclass(frozen=True, kw_only=True)
class Configuration:
    """A countermeasure for every data-dependent cluster of the plan, with its batches.

    Attributes:
        countermeasure: [`LocalFlooding`][] (σ, d per source, Section 3) or
            uncapped [`Scramblers`][] (σ, n, d per scrambler, Section 4).
        batch_sizes: the balanced batch sizes of the scramblers of one cluster, largest first
            (`dpcomm.plan.costs.balanced_batch_sizes` of S_t and n; None for local).
    """

    countermeasure: LocalFlooding | Scramblers
    batch_sizes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        countermeasure = self.countermeasure
        if isinstance(countermeasure, LocalFlooding):
            if self.batch_sizes is not None:
                raise InvalidParameterError(
                    "batch_sizes", "None for local flooding (no scramblers)", self.batch_sizes
                )
        elif isinstance(countermeasure, Scramblers) and not countermeasure.capped:
            if not self.batch_sizes:
                raise InvalidParameterError(
                    "batch_sizes", "balanced batches for scramblers", self.batch_sizes
                )
        else:
            raise InvalidParameterError(
                "countermeasure", "LocalFlooding or uncapped Scramblers", countermeasure
            )

    @classmethod
    def for_sources(
        cls, countermeasure: LocalFlooding | Scramblers, *, num_sources: int
    ) -> Configuration:
        """``countermeasure`` with the balanced batches of ``num_sources`` (S_t) sources."""
        if isinstance(countermeasure, Scramblers):
            batches = balanced_batch_sizes(num_sources, countermeasure.batch_size)
            return cls(countermeasure=countermeasure, batch_sizes=batches)
        return cls(countermeasure=countermeasure)

    @property
    def mechanism(self) -> CountermeasureName:
        """``"scrambler"`` or ``"local"`` (the countermeasure's name)."""
        return self.countermeasure.name

    @property
    def sampling_rate(self) -> float:
        """σ."""
        return self.countermeasure.sampling_rate

    @property
    def num_dummies(self) -> int:
        """d, per scrambler or per source (local)."""
        return self.countermeasure.num_dummies

    @property
    def batch_size(self) -> int | None:
        """n, the most sources per scrambler (None for local)."""
        countermeasure = self.countermeasure
        return countermeasure.batch_size if isinstance(countermeasure, Scramblers) else None

    @property
    def num_scramblers(self) -> int | None:
        """⌈S_t/n⌉ scramblers per cluster (None for local)."""
        return None if self.batch_sizes is None else len(self.batch_sizes)

    def with_dummies(self, num_dummies: int) -> Configuration:
        """The same configuration with d = ``num_dummies``."""
        return replace(self, countermeasure=replace(self.countermeasure, num_dummies=num_dummies))

    def describe(self) -> str:
        """One line for reports."""
        if self.batch_sizes is None:
            return self.countermeasure.describe()
        noun = "scrambler" if self.num_scramblers == 1 else "scramblers"
        return (
            f"{self.num_scramblers} {noun} of n={self.batch_size}, d={self.num_dummies} "
            f"dummies each, sampling σ={self.sampling_rate:g}"
        )


def describe_batches(batch_sizes: Sequence[int]) -> str:
    """``"124 scramblers: 70 of 100 sources, 54 of 99"`` (``"10 scramblers of 100 sources"``)."""
    counts: dict[int, int] = {}
    for size in batch_sizes:
        counts[size] = counts.get(size, 0) + 1
    total = len(batch_sizes)
    noun = "scrambler" if total == 1 else "scramblers"
    if not counts:
        return "no scrambler"
    if len(counts) == 1:
        return f"{total:,} {noun} of {batch_sizes[0]:,} sources"
    parts = [
        f"{count:,} of {size:,}" + (" sources" if index == 0 else "")
        for index, (size, count) in enumerate(sorted(counts.items(), reverse=True))
    ]
    return f"{total:,} {noun}: " + ", ".join(parts)


@dataclass(frozen=True, kw_only=True)
class PlanCandidate:
    """One feasible configuration with its guarantee and costs.

    Attributes:
        configuration: the countermeasure.
        num_sources: S_t, sources recruited.
        epsilon: the plan's ε: the accountant's value for the chosen configuration, the target
            ε it was checked against otherwise.
        delta: the plan's δ.
        network_load_messages: every message of the transformed plan
            ([`dpcomm.calibration.costs.plan_costs`][]).
        max_channels_per_node: the largest number of secure channels of a node (upper bound).
        extra_consents: S_t − S.
        utility: expected tuples used / S, min(1, S_t (1 − σ + σ/T) / S).
    """

    configuration: Configuration
    num_sources: int
    epsilon: float
    delta: float
    network_load_messages: int
    max_channels_per_node: int
    extra_consents: int
    utility: float

    @property
    def costs(self) -> tuple[int, int, int]:
        """(network load, max channels, extra consents): the objectives of the Pareto front."""
        return (self.network_load_messages, self.max_channels_per_node, self.extra_consents)

    def candidate_fields(self) -> dict[str, Any]:
        """The candidate's fields by name (to build a record that extends it)."""
        return {f.name: getattr(self, f.name) for f in fields(PlanCandidate)}
