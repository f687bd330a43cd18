"""A run's report, typed: privacy, utility, efficiency (with the traffic of every flow).

Every engine's run gets the same [`Report`][], built once from the run and its non-private
baseline (the same plan without countermeasures, Section 2.5, not accounted): the plan's and
every cluster's guarantee ([`PrivacyReport`][]), the utility measured on the two runs'
results ([`dpcomm.pipeline.utility`][]), the costs against the baseline
([`EfficiencyReport`][]), and what only the engine measured (``details``: a deployment's
wire, a Dask run's partitions). Values stay as they are (ε = ∞ is a float) until
[`Report.to_dict`][], the JSON document ``--json`` prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dpcomm._json import json_ready
from dpcomm.accounting.mechanisms import ScramblerMechanism
from dpcomm.engine.run import Run, RunDetails
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.estimate import ESTIMATE_SEMANTICS, EstimateReport
from dpcomm.pipeline.utility import AggregateUtility, KMeansUtility, ReleaseUtility
from dpcomm.plan.countermeasures import NoCountermeasure
from dpcomm.plan.privacy import ClusterGuarantee, PlanGuarantee

if TYPE_CHECKING:
    from dpcomm.release.report import ReleaseReport

SEEDED_NOTE = (
    "seeded run: every draw follows from the seed, so the guarantee does not hold against "
    "anyone who knows the seed (use no seed for a real deployment)"
)
UNSEEDED_NOTE = "fresh operating-system entropy"

NO_COUNTERMEASURE_REASON = (
    "no countermeasure: every message goes to the target its data chooses, so the traffic "
    "tells neighbouring inputs apart; sampling σ > 0 (local flooding) or scramblers make it "
    "finite (`dpcomm plan` finds the cheapest configuration for a target ε)"
)

#: What the values of an Aggregate result are (said in every report).
RELEASE_SEMANTICS = (
    "a differentially private release: every key of the public key domain (or the keys "
    "whose noisy count passed OpenDP's threshold, where no domain was given), each COUNT and "
    "SUM of the tuples that reached their compute node plus noise drawn by OpenDP at the "
    "result node (AVG is the noisy SUM over the noisy COUNT); see report.release"
)
RELEASE_ESTIMATE_SEMANTICS = (
    "estimates over every tuple from a differentially private release: its noisy COUNT and "
    "SUM divided by the known delivery probability P (Horvitz–Thompson), AVG their ratio, "
    "each with a standard error and a 95% interval covering both the sampling's and the "
    "noise's errors, computed from released values only (post-processing, as private as "
    "the release); see report.release and report.estimate"
)
RESULT_SEMANTICS = (
    "exact over the tuples that reached their compute node; not differentially private: the "
    "countermeasures hide the traffic pattern, not the values"
)


# ---------------------------------------------------------------------------------- privacy


@dataclass(frozen=True)
class PartPrivacy:
    """One kind of mechanism instance of a cluster, and its guarantee.

    Attributes:
        batch_size: n of the scramblers of this part (None: the sources' local randomizers).
        instances: how many instances (scramblers of this size, or sources).
        epsilon: ε of one instance at ``delta``.
        delta: δ of one instance.
        method: the accounting method that gave ε.
        lower_bound: a certified lower bound on ε (None if unavailable).
    """

    batch_size: int | None
    instances: int
    epsilon: float
    delta: float
    method: str
    lower_bound: float | None


@dataclass(frozen=True)
class ClusterPrivacy:
    """One cluster of the plan: its countermeasure and its guarantee.

    Attributes:
        cluster: the cluster's name (its grouping set or iteration).
        data_dependent: whether its destinations depend on the data (else ε = 0).
        num_targets: T, its targets.
        num_senders: its senders.
        countermeasure: the countermeasure, described.
        epsilon: the cluster's ε at ``delta`` (its parts run in parallel).
        delta: the cluster's δ.
        method: how ε was accounted.
        why_infinite: why ε = ∞ and what would make it finite (None when finite).
        parts: the mechanism instances and their guarantees.
    """

    cluster: str
    data_dependent: bool
    num_targets: int
    num_senders: int
    countermeasure: str
    epsilon: float
    delta: float
    method: str
    why_infinite: str | None
    parts: tuple[PartPrivacy, ...]


@dataclass(frozen=True)
class PrivacyReport:
    """The whole plan's guarantee (Theorem 2 over its data paths) and every cluster's.

    Attributes:
        epsilon: the plan's ε at ``delta`` (the smaller of ``epsilon_pld`` and
            ``epsilon_basic``).
        delta: the plan's δ.
        method: how ε was obtained.
        epsilon_pld: ε of the worst data path with its clusters' privacy loss distributions
            composed (None: not computed, e.g. one cluster per path).
        epsilon_basic: Theorem 2's sum over the worst data path, each cluster at
            ``delta_per_cluster``.
        epsilon_lower_bound: a certified lower bound on the plan's ε (None if unavailable).
        delta_per_cluster: δ of each cluster in Theorem 2's sum.
        notes: how the guarantee was computed, where it matters.
        worst_path: the clusters of the worst data path.
        caveats: what the guarantee does not cover.
        clusters: every cluster of the plan.
    """

    epsilon: float
    delta: float
    method: str
    epsilon_pld: float | None
    epsilon_basic: float
    epsilon_lower_bound: float | None
    delta_per_cluster: float
    notes: tuple[str, ...]
    worst_path: tuple[str, ...]
    caveats: tuple[str, ...]
    clusters: tuple[ClusterPrivacy, ...]

    def to_dict(self) -> dict[str, Any]:
        """The guarantee as JSON (∞ is ``"inf"``)."""
        document: dict[str, Any] = json_ready(asdict(self))
        return document


def _why_infinite(item: ClusterGuarantee) -> str | None:
    """Why a cluster's ε is infinite and what would make it finite (None when finite)."""
    if not math.isinf(item.guarantee.epsilon) or not item.cluster.data_dependent:
        return None
    if isinstance(item.countermeasure, NoCountermeasure):
        return NO_COUNTERMEASURE_REASON
    from dpcomm.accounting.accountant import explain_infinite

    for part in item.parts:
        mechanism = part.mechanism
        if math.isinf(part.guarantee.epsilon) and mechanism is not None:
            return explain_infinite(mechanism, delta=part.guarantee.delta).describe()
    return None


def privacy_report(privacy: PlanGuarantee) -> PrivacyReport:
    """The plan's and every cluster's guarantee."""
    clusters = []
    for item in privacy.clusters:
        cluster = item.cluster
        parts = tuple(
            PartPrivacy(
                batch_size=part.mechanism.batch_size
                if isinstance(part.mechanism, ScramblerMechanism)
                else None,
                instances=part.num_instances,
                epsilon=part.guarantee.epsilon,
                delta=part.guarantee.delta,
                method=part.guarantee.method,
                lower_bound=part.lower_bound,
            )
            for part in item.parts
        )
        clusters.append(
            ClusterPrivacy(
                cluster=cluster.name,
                data_dependent=cluster.data_dependent,
                num_targets=cluster.num_targets,
                num_senders=cluster.num_senders,
                countermeasure=item.countermeasure.describe(),
                epsilon=item.guarantee.epsilon,
                delta=item.guarantee.delta,
                method=item.guarantee.method,
                why_infinite=_why_infinite(item),
                parts=parts,
            )
        )
    return PrivacyReport(
        epsilon=privacy.guarantee.epsilon,
        delta=privacy.guarantee.delta,
        method=privacy.guarantee.method,
        epsilon_pld=privacy.pld_epsilon,
        epsilon_basic=privacy.basic_epsilon,
        epsilon_lower_bound=privacy.lower_bound,
        delta_per_cluster=privacy.delta_per_cluster,
        notes=tuple(privacy.notes),
        worst_path=tuple(privacy.worst_path),
        caveats=tuple(privacy.caveats),
        clusters=tuple(clusters),
    )


# ------------------------------------------------------------------------------- efficiency


@dataclass(frozen=True)
class FlowTrafficReport:
    """What the observer saw of one routed flow: messages, dummies among them, edges.

    ``dummies`` is None under a noisy release: the observer cannot tell dummies from real
    messages, and their count follows the data (where the sampled tuples went).
    """

    flow: str
    messages: int
    dummies: int | None
    edges: int


@dataclass(frozen=True)
class EfficiencyReport:
    """Messages, bytes, channels and consents of a run, beside the non-private baseline.

    Attributes:
        messages: every message sent, dummies included.
        messages_nonprivate: the baseline's messages.
        message_overhead: ``messages / messages_nonprivate`` (NaN without baseline messages).
        dummy_messages: messages that carry no real tuple (None under a noisy release: the
            observer cannot tell them apart, and their count follows the data).
        bytes: messages times the frame size.
        bytes_nonprivate: the baseline's bytes.
        frame_bytes: the size every message is padded to.
        max_channels_per_node: the most secure channels (distinct peers) of one node.
        mean_channels_per_node: their mean over the nodes that have any.
        max_channels_per_node_nonprivate: the baseline's most channels of one node (None
            under a noisy release: the non-private traffic is the data's).
        mean_channels_per_node_nonprivate: the baseline's mean (None under a release).
        max_channels_by_role: the most channels of one node, per role.
        num_scramblers: scramblers of the plan.
        batch_sizes: per scrambled flow, the distinct batch sizes, largest first.
        extra_consents: S_t − S, the sources to add to keep the non-private utility.
        engine: the engine's name.
        seconds: wall time of the run (None under a noisy release: a timing may depend on
            the data).
        messages_per_second: ``messages / seconds`` (None under a noisy release).
        traffic: every routed flow's messages, in plan order.
    """

    messages: int
    messages_nonprivate: int
    message_overhead: float
    dummy_messages: int | None
    bytes: int
    bytes_nonprivate: int
    frame_bytes: int
    max_channels_per_node: int
    mean_channels_per_node: float
    max_channels_per_node_nonprivate: int | None
    mean_channels_per_node_nonprivate: float | None
    max_channels_by_role: Mapping[str, int]
    num_scramblers: int
    batch_sizes: Mapping[str, tuple[int, ...]]
    extra_consents: int
    engine: str
    seconds: float | None
    messages_per_second: float | None
    traffic: tuple[FlowTrafficReport, ...]

    def to_dict(self) -> dict[str, Any]:
        """The costs as JSON (NaN is ``"NaN"``)."""
        document: dict[str, Any] = json_ready(asdict(self))
        return document


def efficiency_report(run: Run, baseline: Run, *, released: bool = False) -> EfficiencyReport:
    """Messages, bytes, channels and consents of ``run``, beside the non-private ``baseline``.

    ``released`` (a noisy release): only what the observer of the traffic sees (accounted by
    the plan's guarantee, composed with the release's) and what public parameters give; not
    the dummies among the messages (the observer cannot tell them apart, and their count
    follows the data), the baseline's channels (the traffic of the exact data) nor the wall
    time (which may depend on the data).
    """
    mine, base = run.efficiency, baseline.efficiency
    seconds = None if released else run.seconds
    return EfficiencyReport(
        messages=mine.messages,
        messages_nonprivate=base.messages,
        message_overhead=mine.messages / base.messages if base.messages else math.nan,
        dummy_messages=None if released else mine.dummy_messages,
        bytes=mine.bytes,
        bytes_nonprivate=base.bytes,
        frame_bytes=mine.frame_bytes,
        max_channels_per_node=mine.max_channels,
        mean_channels_per_node=mine.mean_channels,
        max_channels_per_node_nonprivate=None if released else base.max_channels,
        mean_channels_per_node_nonprivate=None if released else base.mean_channels,
        max_channels_by_role=dict(mine.max_channels_by_role),
        num_scramblers=run.transformed.num_scramblers(),
        batch_sizes={
            flow: tuple(sorted(set(sizes), reverse=True))
            for flow, sizes in run.transformed.batches.items()
        },
        extra_consents=run.extra_consents(),
        engine=run.engine,
        seconds=seconds,
        messages_per_second=None
        if seconds is None
        else (mine.messages / seconds if seconds > 0 else math.nan),
        traffic=tuple(
            FlowTrafficReport(
                flow.flow, flow.messages, None if released else flow.dummies, flow.edges
            )
            for flow in run.traffic
        ),
    )


# ----------------------------------------------------------------------------------- report

Utility = TypeVar("Utility", AggregateUtility, KMeansUtility, ReleaseUtility)


@dataclass(frozen=True)
class Report(Generic[Utility]):
    """A run's report: privacy, utility, efficiency; [`to_dict`][] for JSON.

    Attributes:
        query: what ran (the program's name).
        engine: the engine's name.
        countermeasure: the countermeasure, described (one per cluster name when they differ).
        seed: the seed every draw followed from (None: fresh operating-system entropy).
        privacy: the plan's and every cluster's guarantee.
        efficiency: the costs, beside the non-private baseline.
        utility: what the result lost ([`AggregateUtility`][] or [`KMeansUtility`][]); under
            a noisy release, the expected error from public quantities ([`ReleaseUtility`][]).
        sql: the Aggregate query (None for K-means).
        estimate: how the result's values were estimated (None: exact over the delivered
            tuples); then ``result_semantics`` and ``utility`` describe the estimates.
        details: what only the engine measured (a deployment's wire, a Dask run's partitions).
    """

    query: str
    engine: str
    countermeasure: str | Mapping[str, str]
    seed: int | None
    privacy: PrivacyReport
    efficiency: EfficiencyReport
    utility: Utility
    sql: str | None = None
    estimate: EstimateReport | None = None
    details: RunDetails | None = None
    release: ReleaseReport | None = None

    @property
    def randomness(self) -> str:
        """Where the draws came from, and what a seed means for the guarantee."""
        return SEEDED_NOTE if self.seed is not None else UNSEEDED_NOTE

    @property
    def result_semantics(self) -> str | None:
        """What the values of an Aggregate result are (None for K-means)."""
        if self.sql is None:
            return None
        if self.release is not None:
            return RELEASE_SEMANTICS if self.estimate is None else RELEASE_ESTIMATE_SEMANTICS
        return RESULT_SEMANTICS if self.estimate is None else ESTIMATE_SEMANTICS

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON, as the CLI's ``--json`` prints it (∞ is ``"inf"``).

        ``{"query", "engine", "countermeasure", "seed", "randomness", "privacy",
        "efficiency", "utility", ...}``: an Aggregate report adds ``sql`` and
        ``result_semantics`` (and ``estimate`` when the values are estimates), an engine its
        details (a deployment: ``wire``, ``lost_scramblers``, ``left_out_sources``,
        ``missing_outputs``, ``errors``, ``failures``).
        """
        document: dict[str, Any] = {
            "query": self.query,
            "engine": self.engine,
            "countermeasure": self.countermeasure,
            "seed": self.seed,
            "randomness": self.randomness,
            "privacy": asdict(self.privacy),
            "efficiency": asdict(self.efficiency),
        }
        if self.sql is not None:
            document["sql"] = self.sql
            document["result_semantics"] = self.result_semantics
        document["utility"] = self.utility.to_dict()
        if self.details is not None:
            document.update(self.details.to_dict())
        if self.estimate is not None:
            document["estimate"] = self.estimate.to_dict()
        if self.release is not None:
            document["release"] = asdict(self.release)
        ready: dict[str, Any] = json_ready(document)
        return ready

    def summary(self) -> str:
        """One line: ε at δ (and the method), rows used per grouping set, messages sent.

        Under a noisy release, the ε of traffic and release together first (what an observer
        of both learns), then each one's; the number of caveats the guarantee has, if any.
        """
        privacy, release = self.privacy, self.release
        if release is None:
            parts = [f"ε = {privacy.epsilon:.4g} at δ = {privacy.delta:g} ({privacy.method})"]
        else:
            parts = [
                f"ε = {release.epsilon_total:.4g} at δ = {release.composed_delta:g} for the "
                f"traffic and the noisy release together (traffic ε1 = {privacy.epsilon:.4g}, "
                f"release ε2 = {release.epsilon:.4g})"
            ]
        if privacy.caveats:
            count = len(privacy.caveats)
            parts.append(f"{count} caveat{'s' if count > 1 else ''} (report.privacy.caveats)")
        if isinstance(self.utility, AggregateUtility | ReleaseUtility) and self.utility.sources:
            parts.append(rows_used(self.utility))
        parts.append(f"{self.efficiency.messages:,} messages")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"Report({self.summary()})"


def rows_used(utility: AggregateUtility | ReleaseUtility) -> str:
    """``8,093 of 10,000 rows used``; per grouping set when there are several.

    Under a noisy release, the rows expected used (P × S: public), never the count.

    Examples:
        >>> from dpcomm.pipeline.utility import AggregateUtility
        >>> rows_used(AggregateUtility(344, {"(a)": 300, "(b)": 290}, (), 0, 0, {}, {}))
        '(a) 300, (b) 290 of 344 rows used'
    """
    if isinstance(utility, ReleaseUtility):
        expected = utility.expected_tuples_used
        if len(expected) == 1:
            return f"about {next(iter(expected.values())):,.0f} of {utility.sources:,} rows used"
        shown = ", ".join(f"{name} {count:,.0f}" for name, count in expected.items())
        return f"about {shown} of {utility.sources:,} rows used"
    used = utility.tuples_used
    if len(used) == 1:
        return f"{next(iter(used.values())):,} of {utility.sources:,} rows used"
    shown = ", ".join(f"{name} {count:,}" for name, count in used.items())
    return f"{shown} of {utility.sources:,} rows used"


def run_report(
    run: Run, baseline: Run, utility: Utility, *, sql: str | None = None, released: bool = False
) -> Report[Utility]:
    """The report of ``run`` against its non-private ``baseline``, with its ``utility``.

    ``released``: the run has a noisy release (the efficiency says nothing of the data:
    [`efficiency_report`][]).
    """
    if run.privacy is None:
        raise InvalidParameterError(
            "run", "an accounted run (delta given)", "a run without privacy"
        )
    countermeasures = {
        c.name: run.transformed.requested[c.name].describe()
        for c in run.transformed.plan.clusters
        if c.data_dependent
    }
    described = sorted(set(countermeasures.values()))
    return Report(
        query=run.program.name,
        engine=run.engine,
        countermeasure=described[0] if len(described) == 1 else countermeasures,
        seed=run.seed,
        privacy=privacy_report(run.privacy),
        efficiency=efficiency_report(run, baseline, released=released),
        utility=utility,
        sql=sql,
        details=run.details if run.details is None or not released else run.details.released(),
    )
