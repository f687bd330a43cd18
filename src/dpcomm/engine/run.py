"""What every engine returns: a [`Run`][], and what every engine does before and after.

An engine (the in-memory simulator, the networked runtime, a distributed one) executes a query
program's roles on its plan with countermeasures; the rest is shared here so that the engines
cannot drift apart:

* [`prepare`][]: the transformed plan (`dpcomm.plan.transform`), the plan's guarantee
  (`dpcomm.plan.account_plan`), and the warnings about outcomes a user may not expect;
* [`Run`][]: the result, the final state, which tuples were delivered, the traffic of every
  routed flow as the observer sees it, the efficiency metrics and the guarantee (none for a
  run that was not accounted: the non-private baseline a report compares with).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Required, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

from dpcomm.engine.traffic import Efficiency, FlowSummary, FlowTraffic, efficiency
from dpcomm.errors import BalancedBatchesWarning, InvalidParameterError, warn
from dpcomm.plan.countermeasures import Countermeasure, NoCountermeasure, Scramblers
from dpcomm.plan.model import ROLES, ExecutionPlan
from dpcomm.plan.transform import TransformedPlan, transform
from dpcomm.protocol.roles import ProgramHooks
from dpcomm.queries.program import QueryProgram

if TYPE_CHECKING:  # the accountant (dp_accounting, scipy) is imported where a plan is accounted
    from dpcomm.plan.privacy import PlanGuarantee

BoolArray = npt.NDArray[np.bool_]
Flows = TypeVar("Flows", FlowTraffic, FlowSummary, FlowTraffic | FlowSummary)


class RunOptions(TypedDict, total=False):
    """The options of one run, whichever engine runs it (every engine's ``execute`` keywords).

    Attributes:
        delta: the whole plan's δ for the privacy report (None: the run is not accounted, as
            the non-private baseline of a report is not).
        seed: the same seed gives the same run in every engine; None draws fresh entropy.
        progress: show a progress bar.
        target_epsilon: refuse (before running) a plan whose ε exceeds it.
        prepared: the plan already prepared (`prepare`) with these countermeasures, δ and
            target: the engine executes it instead of preparing it again (what the run
            pipeline, `dpcomm.pipeline.job.prepare`, hands every engine).
    """

    delta: Required[float | None]
    seed: int | None
    progress: bool
    target_epsilon: float | None
    prepared: Prepared


class PackedMasks(Mapping[str, BoolArray]):
    """Delivered masks kept as bits (S/8 bytes per flow), unpacked when one is read.

    What an engine over many machines returns for 10^8 sources: the client keeps a bit per
    source and flow, and the number of delivered tuples of every flow.
    """

    def __init__(self) -> None:
        self._bits: dict[str, npt.NDArray[np.uint8]] = {}
        self._sizes: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def add(self, name: str, bits: npt.NDArray[np.uint8], size: int) -> None:
        """The mask of ``name``: ``size`` bits packed by ``numpy.packbits`` (big-endian)."""
        self._bits[name] = bits
        self._sizes[name] = size
        self.counts[name] = int(np.unpackbits(bits, count=size).sum())

    def bits(self, name: str) -> npt.NDArray[np.uint8]:
        """The packed mask of ``name``."""
        return self._bits[name]

    def __getitem__(self, name: str) -> BoolArray:
        return np.unpackbits(self._bits[name], count=self._sizes[name]).astype(bool)

    def __iter__(self) -> Iterator[str]:
        return iter(self._bits)

    def __len__(self) -> int:
        return len(self._bits)


class RunDetails(Protocol):
    """What only one engine measured (a deployment's wire, a Dask run's partitions).

    The run's report carries it as it is and adds its document ([`to_dict`][]) to its own.
    """

    def to_dict(self) -> dict[str, Any]:
        """The details as JSON, merged into the report's document."""
        ...

    def released(self) -> RunDetails:
        """The details a run with a noisy release may print: what the observer sees anyway."""
        ...


@dataclass(frozen=True, eq=False)
class Run:
    """One execution of a program with countermeasures, by any engine.

    Attributes:
        engine: the engine's name (``memory``, ``network``, ...).
        program: the program that ran.
        transformed: the plan with its countermeasures (node ids are those of
            ``transformed.routed``).
        privacy: the plan's guarantee (Theorem 2) for the batches as they ran; None for a run
            that was not accounted (``delta=None``: the non-private baseline of a report).
        state: the program's final state.
        result: the program's result.
        delivered: per data-dependent flow, which sources' real tuples were counted.
        traffic: every routed flow's messages as the observer sees them, in plan order: its
            edges (`FlowTraffic`), or their summary where an engine keeps the edges
            spread over machines (`FlowSummary`, the Dask engine's large runs).
        efficiency: messages, bytes and channels.
        seed: the seed the run was drawn from (None: fresh entropy, unpredictable).
        seconds: wall time of the execution.
        details: what only this engine measured (a deployment's wire, its timings, ...),
            added to the run's report; None when there is nothing more.
        true_targets: per data-dependent flow, the target each source's data chose (known to
            an engine that holds every source's data: the in-memory one; None otherwise).
        result_computed_here: whether ``result`` was computed in this process from the
            delivered tuples (the in-memory and Dask engines); False when it was computed
            elsewhere (a deployment's result node merged the compute nodes' outputs), and the
            report checks it against the delivered tuples.
    """

    engine: str
    program: ProgramHooks
    transformed: TransformedPlan
    privacy: PlanGuarantee | None
    state: Any
    result: Any
    delivered: Mapping[str, BoolArray]
    traffic: tuple[FlowTraffic | FlowSummary, ...]
    efficiency: Efficiency
    seed: int | None
    seconds: float
    details: RunDetails | None = None
    true_targets: dict[str, npt.NDArray[np.int64]] | None = None
    result_computed_here: bool = True

    @property
    def countermeasures(self) -> dict[str, Countermeasure]:
        """The countermeasure asked for every cluster, by cluster name."""
        return self.transformed.requested

    def tuples_used(self) -> dict[str, int]:
        """Real tuples counted, per data-dependent flow."""
        if isinstance(self.delivered, PackedMasks):
            return dict(self.delivered.counts)
        return {name: int(mask.sum()) for name, mask in self.delivered.items()}

    def flow_traffic(self, name: str) -> FlowTraffic | FlowSummary:
        """The traffic of the routed flow called ``name``."""
        for flow in self.traffic:
            if flow.flow == name:
                return flow
        raise KeyError(name)

    def edges(self) -> tuple[FlowTraffic, ...]:
        """Every routed flow's edges; an error for a run that kept only summaries."""
        flows = tuple(f for f in self.traffic if isinstance(f, FlowTraffic))
        if len(flows) != len(self.traffic):
            raise InvalidParameterError(
                "run",
                "a run whose traffic was kept edge by edge (DaskEngine(collect_traffic=True))",
                f"a {self.engine} run that kept summaries of its traffic",
            )
        return flows

    def extra_consents(self) -> int:
        """Additional sources S_t − S to keep the non-private utility (Sections 3.3, 4.4)."""
        plan = self.transformed.plan
        senders = max((plan.group(g.name).count for g in plan.data_holders), default=0)
        return max(0, self.transformed.sources_needed() - senders)


@dataclass(frozen=True, eq=False)
class Prepared:
    """What every engine computes before running: the transformed plan and its guarantee.

    ``privacy`` is None when the plan was not accounted (``prepare(..., delta=None)``).
    """

    transformed: TransformedPlan
    privacy: PlanGuarantee | None


def prepare(
    program: QueryProgram,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float | None,
    target_epsilon: float | None = None,
) -> Prepared:
    """Transform and account ``program``'s plan, and warn about outcomes easy to miss.

    Warnings, each said once per run from the caller's line (`dpcomm.errors.warn`):
    σ = 1 (only the tuples whose random target is their own are used; a
    `dpcomm.errors.DpcommWarning`); without ``target_epsilon``, scramblers whose
    balanced batches give another ε than full batches of the n asked for
    ([`balanced_batches_note`][], a `dpcomm.errors.BalancedBatchesWarning`). With
    ``target_epsilon`` (what ``dpcomm plan`` and [`dpcomm.calibrate`][] promise), a plan ε
    above it is refused ([`refuse_above_target`][]), before any engine runs. With
    ``delta=None`` the plan is only transformed (no guarantee, no warning): what a report's
    non-private baseline needs.
    """
    plan = program.plan
    transformed = transform(plan, countermeasures)
    program.check_countermeasures(countermeasures)  # a release's noise fits this traffic
    if delta is None:
        return Prepared(transformed, None)
    from dpcomm.plan.privacy import account_plan

    privacy = account_plan(plan, countermeasures, delta=delta)
    certain: dict[str, int] = {}
    for cluster_guarantee in privacy.clusters:
        cluster = cluster_guarantee.cluster
        chosen = transformed.requested[cluster.name]
        if not cluster.data_dependent or cluster.num_targets == 1:
            continue
        if not isinstance(chosen, NoCountermeasure) and chosen.sampling_rate == 1.0:
            certain[cluster.name] = cluster.num_targets
    if certain:
        targets = set(certain.values())
        share = f"1/T = 1/{targets.pop()}" if len(targets) == 1 else "1/T"
        warn(
            f"sampling_rate σ = 1 in {_clusters(certain)}: every destination is drawn "
            f"independently of the data, so only tuples whose random target is their own "
            f"({share} on average) are used"
        )
    short = short_batches(plan, transformed)
    if target_epsilon is None:
        note = None if short is None else balanced_batches_note(short, privacy, delta=delta)
        if note is not None:
            warn(note, BalancedBatchesWarning)
    else:  # the ε asked for is the target: the batches matter only if ε exceeds it
        refuse_above_target(privacy, target_epsilon)
    return Prepared(transformed, privacy)


def _clusters(names: Iterable[str]) -> str:
    listed = list(names)
    return ("cluster " if len(listed) == 1 else "clusters ") + ", ".join(listed)


@dataclass(frozen=True)
class ShortBatches:
    """The scramblers' balanced batches smaller than the n asked for, in every cluster.

    Attributes:
        plan: the plan.
        countermeasures: its countermeasures, as the run was given them.
        full: per cluster, its batches as if each held n sources (n → number of batches).
        described: the clusters' batches, in words (clusters with the same batches together).
    """

    plan: ExecutionPlan
    countermeasures: Countermeasure | Mapping[str, Countermeasure]
    full: Mapping[str, Mapping[int, int]]
    described: str


def short_batches(plan: ExecutionPlan, transformed: TransformedPlan) -> ShortBatches | None:
    """The clusters whose scramblers have a batch smaller than n (None: there are none).

    Scramblers cut a cluster's S senders into ⌈S/n⌉ batches whose sizes differ by at most one
    (`dpcomm.plan.balanced_batch_sizes`), each accounted at its own size: a batch is
    short when n does not divide S, or when n > S.
    """
    full: dict[str, dict[int, int]] = {}
    same: dict[str, list[str]] = {}
    for cluster in plan.clusters:
        chosen = transformed.requested[cluster.name]
        if not isinstance(chosen, Scramblers) or not cluster.data_dependent:
            continue
        if cluster.num_targets == 1:
            continue
        sizes = [s for m in cluster.members for s in transformed.batches.get(m.flow.name, ())]
        if not sizes or min(sizes) == chosen.batch_size:
            continue
        full[cluster.name] = {chosen.batch_size: len(sizes)}
        shown = " or ".join(str(s) for s in sorted(set(sizes)))
        batches = (
            f"1 batch of {shown} sources"
            if len(sizes) == 1
            else f"{len(sizes)} balanced batches of {shown} sources"
        )
        described = f"n = {chosen.batch_size}, {cluster.num_senders} senders: {batches}"
        same.setdefault(described, []).append(cluster.name)
    if not full:
        return None
    parts = "; ".join(f"{_clusters(names)}: {described}" for described, names in same.items())
    return ShortBatches(plan, transformed.requested, full, parts)


def balanced_batches_note(
    short: ShortBatches, privacy: PlanGuarantee, *, delta: float
) -> str | None:
    """What the balanced batches changed in the plan's ε, or None when they changed nothing.

    The plan is accounted again as if every batch held the n asked for (the ε a planner
    promised for n); when the two ε agree to the four significant digits the note prints,
    nothing is said: batches whose smaller sizes leave ε as it was (e.g. an ε that σ's local
    randomizer gives whatever the batch size) are not worth a note.
    """
    from dpcomm.plan.privacy import account_plan

    asked = account_plan(short.plan, short.countermeasures, delta=delta, batch_sizes=short.full)
    epsilon, requested = privacy.guarantee.epsilon, asked.guarantee.epsilon
    if f"{epsilon:.4g}" == f"{requested:.4g}":
        return None
    return (
        f"the plan's ε = {epsilon:.4g} at δ = {delta:g}, not the {requested:.4g} of full "
        f"batches of the n asked for: scramblers run balanced batches, each accounted at its "
        f"own size ({short.described})"
    )


def refuse_above_target(privacy: PlanGuarantee, target_epsilon: float | None) -> None:
    """Refuse, before anything runs, a plan whose ε exceeds ``target_epsilon``.

    An [`InvalidParameterError`][] naming ``target_epsilon``, on one line,
    with the plan's ε (the table's size or the configuration gives more than the target).
    """
    epsilon = privacy.guarantee.epsilon
    if target_epsilon is not None and epsilon > target_epsilon:
        raise InvalidParameterError(
            "target_epsilon",
            f"at least the plan's ε = {epsilon:.6g} at δ = {privacy.guarantee.delta:g} (the "
            "table's size or the configuration gives more than the target; nothing ran)",
            target_epsilon,
        )


def warn_above_target(privacy: PlanGuarantee, target_epsilon: float | None, why: str) -> None:
    """Warn (`dpcomm.errors.DpcommWarning`) when the plan's ε exceeds the target."""
    if target_epsilon is not None and privacy.guarantee.epsilon > target_epsilon:
        warn(
            f"the plan's ε = {privacy.guarantee.epsilon:.4g} exceeds the target ε = "
            f"{target_epsilon:g} asked for ({why})"
        )


def run_efficiency(transformed: TransformedPlan, traffic: list[FlowTraffic]) -> Efficiency:
    """The efficiency metrics of ``traffic`` over the nodes of ``transformed``."""
    routed = transformed.routed
    roles = np.concatenate(
        [
            np.full(group.count, ROLES.index(group.role), dtype=np.int64)
            for group in routed.groups
            if group.physical is None
        ]
    )
    frame = max((flow.message_bytes for flow in transformed.plan.flows), default=1)
    return efficiency(
        traffic, num_nodes=routed.num_nodes, frame_bytes=frame, roles=roles, role_names=ROLES
    )


def in_plan_order(transformed: TransformedPlan, traffic: Sequence[Flows]) -> tuple[Flows, ...]:
    """``traffic`` sorted in the order of the routed flows of ``transformed``."""
    order = {flow.name: index for index, flow in enumerate(transformed.flows)}
    return tuple(sorted(traffic, key=lambda f: order.get(f.flow, len(order))))
