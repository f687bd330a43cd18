"""What the planner is asked for: the privacy target, the plan's shape, the limits, the grid.

* `PlanRequest`: S tuples used, T targets per cluster, G grouping sets or I iterations,
  the whole plan's (ε, δ), and the limits (channels per node, extra consents, utility).
* `SearchOptions`: the grid searched (σ values, an optional restriction list of batch
  sizes n, the mechanisms, the largest d).

Both are frozen and validated on construction (`dpcomm.validation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import CountermeasureName
from dpcomm.validation import MAX_COUNT, MAX_EPSILON, MAX_SOURCES, check_int, check_number

Workload = Literal["aggregate", "kmeans"]

#: σ grid of the search: 0, 0.01, ..., 0.99 (the paper's Table 1 lets σ range over [0, 1)).
DEFAULT_SAMPLING_RATES: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(100))
#: Largest d tried per scrambler (Table 1 goes to 1000).
DEFAULT_MAX_DUMMIES = 20_000
#: The countermeasures the planner chooses among (by `Countermeasure.name`).
SEARCHED_MECHANISMS: tuple[CountermeasureName, ...] = ("scrambler", "local")


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """What the plan must achieve (validated).

    Attributes:
        num_sources: S, real tuples the computation must use (1 to 10^12,
            `dpcomm.validation.MAX_SOURCES`).
        num_targets: T, targets per cluster (2 to 10^6, `dpcomm.validation.MAX_COUNT`).
        workload: ``"aggregate"`` (G grouping sets) or ``"kmeans"`` (I iterations).
        num_clusters: G or I (1 to 10^6).
        epsilon: the plan's ε (> 0, at most `dpcomm.validation.MAX_EPSILON`).
        delta: the plan's δ in [0, 1) (0: a pure ε-DP plan, `dpcomm.calibration.feasibility`).
        max_channels: limit on channels per node (None: no limit).
        max_extra_consents: limit c on S_t − S (None: no limit).
        min_utility: u in (0, 1], the least expected tuples used / S.
        free_clusters: grouping sets of a single compute node (the empty grouping set ``()``)
            besides the G data-dependent ones (Aggregate only): every source sends them one
            message to the same node, traffic independent of the data (ε = 0, Section 2.4),
            so they are costed (messages, channels) but not composed.
    """

    num_sources: int
    num_targets: int
    workload: Workload
    num_clusters: int
    epsilon: float
    delta: float
    max_channels: int | None = None
    max_extra_consents: int | None = None
    min_utility: float = 1.0
    free_clusters: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "num_sources",
            check_int("num_sources S", self.num_sources, minimum=1, maximum=MAX_SOURCES),
        )
        object.__setattr__(
            self,
            "num_targets",
            check_int("num_targets T", self.num_targets, minimum=2, maximum=MAX_COUNT),
        )
        if self.workload not in ("aggregate", "kmeans"):
            raise InvalidParameterError("workload", "'aggregate' or 'kmeans'", self.workload)
        name = "grouping_sets G" if self.workload == "aggregate" else "iterations I"
        object.__setattr__(
            self, "num_clusters", check_int(name, self.num_clusters, minimum=1, maximum=MAX_COUNT)
        )
        object.__setattr__(
            self, "epsilon", check_number("epsilon", self.epsilon, above=0.0, at_most=MAX_EPSILON)
        )
        object.__setattr__(
            self, "delta", check_number("delta", self.delta, at_least=0.0, below=1.0)
        )
        if self.max_channels is not None:
            object.__setattr__(
                self, "max_channels", check_int("max_channels", self.max_channels, minimum=1)
            )
        if self.max_extra_consents is not None:
            object.__setattr__(
                self,
                "max_extra_consents",
                check_int("max_extra_consents", self.max_extra_consents, minimum=0),
            )
        object.__setattr__(
            self,
            "min_utility",
            check_number("min_utility", self.min_utility, above=0.0, at_most=1.0),
        )

        object.__setattr__(
            self,
            "free_clusters",
            check_int("free_clusters", self.free_clusters, minimum=0, maximum=MAX_COUNT),
        )
        if self.free_clusters and self.workload != "aggregate":
            raise InvalidParameterError(
                "free_clusters", "0 for K-means (no grouping set)", self.free_clusters
            )

    @property
    def cluster_delta(self) -> float:
        """δ/G: each cluster's δ in the basic-composition check (Theorem 2) only.

        ``delta`` is the whole plan's δ: the PLD check composes the G clusters at it, and the
        reported guarantee is `dpcomm.plan.account_plan`'s at it.
        """
        return self.delta / self.num_clusters

    def allows_channels(self, channels: int) -> bool:
        """True when a node with ``channels`` secure channels is within ``max_channels``."""
        return self.max_channels is None or channels <= self.max_channels


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """The grid the planner searches (validated).

    Attributes:
        sampling_rates: the σ values, each in [0, 1).
        batch_sizes: a restriction list of n: only the numbers of scramblers ⌈S_t/n⌉ of these
            (those above S_t skipped); None: every number of scramblers.
        mechanisms: which of ``"scrambler"`` and ``"local"`` to consider.
        max_dummies: largest d per scrambler tried.
    """

    sampling_rates: Sequence[float] = DEFAULT_SAMPLING_RATES
    batch_sizes: Sequence[int] | None = None
    mechanisms: Sequence[CountermeasureName] = SEARCHED_MECHANISMS
    max_dummies: int = DEFAULT_MAX_DUMMIES

    def __post_init__(self) -> None:
        rates = tuple(self.sampling_rates)
        if not rates:
            raise InvalidParameterError("sampling_rates", "at least one σ", rates)
        object.__setattr__(
            self,
            "sampling_rates",
            tuple(check_number("sampling_rates", r, at_least=0.0, below=1.0) for r in rates),
        )
        if self.batch_sizes is not None:
            if not self.batch_sizes:
                raise InvalidParameterError("batch_sizes", "at least one n", self.batch_sizes)
            object.__setattr__(
                self,
                "batch_sizes",
                tuple(check_int("batch_sizes", n, minimum=1) for n in self.batch_sizes),
            )
        mechanisms = tuple(self.mechanisms)
        if not mechanisms or any(m not in SEARCHED_MECHANISMS for m in mechanisms):
            raise InvalidParameterError("mechanisms", "'scrambler' and/or 'local'", self.mechanisms)
        object.__setattr__(self, "mechanisms", mechanisms)
        object.__setattr__(
            self, "max_dummies", check_int("max_dummies", self.max_dummies, minimum=0)
        )
