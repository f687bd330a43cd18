"""Statistical audit of the whole mechanism: the traffic and the noisy release, observed together.

An observer of a run with ``release=`` sees the traffic (what the countermeasure covers, ε1)
and the released values (what the noise covers, ε2); the report claims one guarantee for both
(``report.release.epsilon_total``: their PLD composition, or the paper's sum ε1 + ε2). This
audit runs the mechanism many times on two neighbouring tables, D and D′, that differ in one
source's row, and puts an empirical lower bound on ε next to that claim, with the statistics
of `dpcomm.experiments.audit` (events selected on half the runs, estimated on the other
half with Clopper-Pearson bounds, Bonferroni over the events).

**The tables** (`release_neighbours`): `RELEASE_AUDIT_SQL` (or another query over
``t(k, v)`` grouped by ``k``: COUNT, SUM, AVG) released over the public key domain {a, b, c},
``v`` clamped to [0, M]. Source 0 holds (a, 50·M) in D, beyond the bound (clamped to M), and
(b, M) in D′; the other n − 1 sources hold (c, M/2). The keys are chosen so that a, b and c go
to three different compute nodes (t = 0, t′ = T − 1, t″ = 1, as the traffic audit's pair):
the row moves between two cells of each released aggregate, by the full sensitivity (1 for
COUNT, M for SUM in each cell), and between two targets of the traffic.

**One run** is what `dpcomm.run_sql` does with the same program, built the cheapest
faithful way (`release_runs`):

* the traffic: the role steps every engine runs, with the engines' randomness streams, for
  run r as the traffic audit runs it (scrambler r and its sources r·n … r·n + n − 1, or the
  sources of block r under local flooding; `dpcomm.experiments.audit.scrambler_runs`).
  A unit test checks that run 0 with the engine's seed *is* the in-memory engine's run: the
  same messages per target and the same exact result;
* the exact result over the tuples the run delivered: COUNT and SUM add up over delivered
  tuples, so each source's contribution to each released cell is computed once by the
  library's own evaluation (`dpcomm.queries.groupby.evaluate_grouping_set` over the
  table the program projected, hence clamped as a run clamps it) and a run's result is its
  delivered sources' contributions added up;
* the noise: the release layer's own noise (`dpcomm.queries.release._noisy`: OpenDP's
  measurement at the scale the program's release computed, after OpenDP's privacy map is
  checked), drawn for the cells of keys a and b of every run at once. OpenDP's noise is never
  seeded (by design), so the lower bound varies from audit to audit; the traffic does not.

The observer's view is reduced to three features, each cut into bins at the quantiles of the
selection half (`BINNINGS`): the traffic's c_t − c_t′ (messages to a's and b's compute
nodes), and Σ_i x_a,i/b_i and Σ_i x_b,i/b_i (each released value of a, and of b, over its
noise scale). Dropping the rest of the view (the other keys' values, the order of messages) is
a post-processing: a lower bound for the reduced view is one for the whole view.

Seeded faults are injected by the tests into the library code this audit calls (a
sensitivity computed too small: noise of half the scale; the clamp skipped), never by an
option of a run; each faulty program still claims the declared guarantee.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dpcomm.accounting.release import Gaussian, Laplace, ReleaseMechanism
from dpcomm.data.table import Table, table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.experiments.audit import (
    CHUNK_SOURCES,
    Categorization,
    EventEstimate,
    estimate_events,
    scrambler_runs,
)
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.validation import check_delta, check_int, check_number, check_probability, make_rng

#: The audited query by default: one noisy aggregate, so that the release's privacy loss sits
#: in two cells (a's SUM and b's), which few runs can show.
RELEASE_AUDIT_SQL = "SELECT k, SUM(v) AS s FROM t GROUP BY k"

#: Source 0's value in D, as a multiple of the bound M: beyond it, so that clamping matters.
OUT_OF_BOUND_FACTOR = 50.0

#: Quantile bins of (the traffic's feature, each released value's): coarse binnings keep
#: enough runs per category for few runs to show an event; the release alone, the traffic
#: alone, and both together (events are chosen among all of them on the selection half).
BINNINGS = ((1, 6), (8, 1), (2, 5), (4, 4))

BoolArray = npt.NDArray[np.bool_]
Countermeasure = Scramblers | LocalFlooding


@dataclass(frozen=True)
class ReleaseNeighbours:
    """The two neighbouring tables of the audit.

    Attributes:
        keys: (a, b, c): source 0's key in D, its key in D′, the other sources' key.
        targets: the compute node of each of them (t, t′, t″).
        bound: M: the SUM's values are clamped to [0, M].
        num_sources: S, the table's rows (n for scramblers: one batch).
    """

    keys: tuple[str, str, str]
    targets: tuple[int, int, int]
    bound: float
    num_sources: int

    @property
    def out_of_bound(self) -> float:
        """Source 0's value in D: 50·M (clamped to M)."""
        return OUT_OF_BOUND_FACTOR * self.bound

    def describe(self) -> str:
        """One line for reports."""
        a, b, c = self.keys
        text = (
            f"source 0 holds ({a!r}, {self.out_of_bound:g}) in D, clamped to {self.bound:g}, "
            f"and ({b!r}, {self.bound:g}) in D′"
        )
        if self.num_sources > 1:
            text += f"; the {self.num_sources - 1} others hold ({c!r}, {self.bound / 2:g})"
        return text

    def tables(self) -> tuple[Table, Table]:
        """D and D′ (FROM name ``t``)."""
        a, b, c = self.keys
        tables = []
        for key, value in ((a, self.out_of_bound), (b, self.bound)):
            keys = np.array([key] + [c] * (self.num_sources - 1), dtype=object)
            values = np.array([value] + [self.bound / 2] * (self.num_sources - 1))
            tables.append(table_from_arrays("t", {"k": keys, "v": values}))
        return tables[0], tables[1]


def release_neighbours(*, num_targets: int, num_sources: int, bound: float) -> ReleaseNeighbours:
    """The audit's tables: keys a, b, c on compute nodes 0, T − 1 and 1 (T >= 3).

    The compute node of a key is a public hash of the key
    (`dpcomm.queries.groupby.partition_keys`); the keys are the first of ``k0``, ``k1``,
    ... to fall on each node.
    """
    from dpcomm.queries.groupby import partition_keys

    size = check_int("num_targets", num_targets, minimum=3)
    count = check_int("num_sources", num_sources, minimum=1)
    limit = check_number("bound", bound, above=0.0)
    wanted = (0, size - 1, 1)
    found: dict[int, str] = {}
    start = 0
    while len(found) < len(wanted):
        names = [f"k{i}" for i in range(start, start + 64)]
        nodes = partition_keys(
            table_from_arrays("keys", {"k": np.array(names, dtype=object)}), size
        )
        for name, node in zip(names, nodes.tolist(), strict=True):
            if node in wanted and node not in found:
                found[node] = name
        start += 64
    a, b, c = (found[t] for t in wanted)
    return ReleaseNeighbours((a, b, c), (0, size - 1, 1), limit, count)


def audited_program(
    table: Table,
    release: ReleaseMechanism,
    neighbours: ReleaseNeighbours,
    num_targets: int,
    sql: str = RELEASE_AUDIT_SQL,
) -> AggregateProgram:
    """The program a run of ``sql`` with ``release`` builds for ``table`` (as run_sql does).

    ``sql`` reads table ``t``, groups by ``k`` alone and releases COUNT, SUM or AVG of ``v``.
    """
    from dpcomm.queries.sql import bind_sql

    bounds = {"v": (0.0, neighbours.bound)}
    clamped = {column for _, column, _, _ in bind_sql(sql, table, bounds=bounds).clamps}
    program = AggregateProgram.from_sql(
        sql,
        table,
        num_targets=num_targets,
        release=release,
        bounds=bounds if "v" in clamped else None,  # a bound no SUM or AVG reads is refused
        keys={"k": list(neighbours.keys)},
    )
    if program.query.grouping_sets != (("k",),):
        raise InvalidParameterError("sql", "a query over t grouped by k alone (GROUP BY k)", sql)
    return program


def contributions(program: AggregateProgram, keys: tuple[str, ...]) -> FloatArray:
    """(S, len(keys), A): what each source's tuple adds to each key's released aggregates.

    Each source's row alone is evaluated by the library (`evaluate_grouping_set`, over
    the program's projected rows, hence clamped as a run clamps them); A follows the order of
    the release's noises. A NULL aggregate (no value) adds 0, as the release counts it.
    """
    from dpcomm.queries.groupby import evaluate_grouping_set

    release = program.release
    table = program.table
    if release is None or table is None:
        raise InvalidParameterError("program", "a program with a release and its rows", program)
    column = program.query.grouping_sets[0][0]
    outputs = [noise.output for noise in release.noises]
    result = np.zeros((table.num_rows, len(keys), len(outputs)))
    for source in range(table.num_rows):
        alone = np.zeros(table.num_rows, dtype=bool)
        alone[source] = True
        for row in evaluate_grouping_set(program.query, table, 0, alone):
            key = row[column]
            if isinstance(key, str) and key in keys:
                values = [row[o] for o in outputs]
                result[source, keys.index(key)] = [
                    float(v) if isinstance(v, int | float) else 0.0 for v in values
                ]
    return result


@dataclass(frozen=True, eq=False)
class ReleaseRuns:
    """What many runs of one table produced, before the release's noise.

    Attributes:
        counts: (runs, T) messages each compute node received in the audited flow: the
            scrambler's forwarded counts, or source 0's d + 1 messages under local flooding.
        delivered: (runs, S) which sources' tuples were counted.
        exact: (runs, keys, A) the exact released aggregates of the keys asked for.
    """

    counts: IntArray
    delivered: BoolArray
    exact: FloatArray


def release_runs(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    *,
    keys: tuple[str, ...],
    runs: int,
    randomness: Randomness,
    first_run: int = 0,
    added: FloatArray | None = None,
) -> ReleaseRuns:
    """Runs ``first_run`` … ``first_run + runs − 1`` of ``program`` (module docstring).

    Run r draws as the engines draw for the nodes of block r of the program's flow: under
    scramblers, scrambler r and its n sources; under local flooding, sources r·S … r·S + S − 1.
    ``added`` is `contributions` of ``program`` and ``keys`` (computed if not given).
    """
    table = program.table
    if table is None:
        raise InvalidParameterError("program", "a program with its rows", program)
    count = check_int("runs", runs, minimum=1)
    first = check_int("first_run", first_run, minimum=0)
    flow = program.flow_names[0]
    size = program.targets_of(0)
    truth = program.route(program.initial_state(), flow, table)
    sources = truth.shape[0]
    tiled = np.tile(truth, (count, 1))
    if isinstance(countermeasure, Scramblers):
        if countermeasure.batch_size != sources:
            raise InvalidParameterError(
                "countermeasure", f"scramblers of n = S = {sources} sources", countermeasure
            )
        steps = scrambler_runs(
            tiled,
            countermeasure,
            num_targets=size,
            randomness=randomness,
            first_run=first,
            flow=flow,
        )
        counts = steps.counts
        real = np.asarray(steps.messages.is_real, dtype=bool)
    elif isinstance(countermeasure, LocalFlooding):
        nodes = np.arange(first * sources, (first + count) * sources, dtype=np.int64)
        messages = roles.source_messages(
            tiled.ravel(),
            countermeasure=countermeasure,
            num_targets=size,
            randomness=randomness,
            flow=flow,
            sources=nodes,
        )
        audited = slice(None, None, sources)
        emitted = np.concatenate([messages.sent[audited, None], messages.flooding[audited]], axis=1)
        rows = np.repeat(np.arange(count, dtype=np.int64), emitted.shape[1])
        counts = np.bincount(rows * size + emitted.ravel(), minlength=count * size)
        counts = counts.reshape(count, size).astype(np.int64)
        real = np.asarray(messages.is_real, dtype=bool)
    else:
        raise InvalidParameterError(
            "countermeasure", "Scramblers(...) or LocalFlooding(...)", countermeasure
        )
    delivered = roles.delivered(real, np.ones(real.shape[0], dtype=bool)).reshape(count, sources)
    if added is None:
        added = contributions(program, keys)
    exact = (delivered.astype(float) @ added.reshape(sources, -1)).reshape(count, *added.shape[1:])
    return ReleaseRuns(counts=counts, delivered=delivered, exact=exact)


def noisy_values(program: AggregateProgram, exact: FloatArray) -> FloatArray:
    """``exact`` (runs, keys, A) plus the release's noise: OpenDP's, as the result node adds it.

    Each aggregate's cells of every run are one vector given to the release layer's noise
    (`dpcomm.queries.release._noisy`): independent noise per cell, at the aggregate's
    scale, after OpenDP's privacy map is checked against the aggregate's share of ε2.
    """
    from dpcomm.queries.release import _noisy

    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a release", program)
    noisy = np.empty_like(exact)
    for index, noise in enumerate(release.noises):
        values = exact[:, :, index].ravel().tolist()
        drawn = np.asarray(_noisy(noise, values), dtype=float)
        noisy[:, :, index] = drawn.reshape(exact.shape[:2])
    return noisy


@dataclass(frozen=True)
class ReleaseAuditReport:
    """The audit of traffic and release together.

    Attributes:
        countermeasure: the traffic's countermeasure.
        release: the release's mechanism (its claimed ε2, δ2).
        neighbours: the neighbouring tables.
        num_targets: T.
        runs: runs per table (half select events, half estimate them).
        confidence: the confidence of the lower bound.
        delta: δ of the comparison: the composed δ the report gives (δ1 + δ2).
        traffic_epsilon: ε1, the traffic's, as the run reports it.
        release_epsilon: ε2, the release's.
        reported_epsilon: the run's claim against an observer of both
            (``report.release.epsilon_total``).
        summed_epsilon: ε1 + ε2.
        noise_scales: each released aggregate (core name) and the scale of its noise.
        lower_bound: the empirical lower bound on ε (holds with probability >= confidence).
        events_tried: events estimated (the Bonferroni factor).
        best_event: the event that gave the lower bound, or None if none beat 0.
        events: every estimated event.
        seconds: wall-clock time of the audit.
    """

    countermeasure: Countermeasure
    release: ReleaseMechanism
    neighbours: ReleaseNeighbours
    num_targets: int
    runs: int
    confidence: float
    delta: float
    traffic_epsilon: float
    release_epsilon: float
    reported_epsilon: float
    summed_epsilon: float
    noise_scales: tuple[tuple[str, float], ...]
    lower_bound: float
    events_tried: int
    best_event: EventEstimate | None
    events: tuple[EventEstimate, ...]
    seconds: float = field(compare=False)

    @property
    def passed(self) -> bool:
        """PASS when the lower bound does not exceed the reported composed ε."""
        return self.lower_bound <= self.reported_epsilon + 1e-9


def _bins(selection: FloatArray, count: int) -> FloatArray:
    """Inner edges of ``count`` quantile bins of ``selection`` (ties merged)."""
    inner = np.quantile(selection, np.linspace(0.0, 1.0, count + 1)[1:-1])
    return np.unique(inner)


def _categorizations(features: list[FloatArray], half: int) -> list[Categorization]:
    """Each run's category under each of `BINNINGS`, bins cut on the selection half.

    A category is the run's quantile bin of each feature (c_t − c_t′, then a's and b's
    released values); the edges are the quantiles of both tables' selection halves.
    """
    result: list[Categorization] = []
    for traffic_bins, release_bins in BINNINGS:
        codes = [np.zeros(f.shape[0], dtype=np.int64) for f in features]
        categories = 1
        for column, bins in enumerate((traffic_bins, release_bins, release_bins)):
            edges = _bins(np.concatenate([f[:half, column] for f in features]), bins)
            for side, values in enumerate(features):
                found = np.searchsorted(edges, values[:, column], side="right")
                codes[side] = codes[side] * (edges.shape[0] + 1) + found
            categories *= edges.shape[0] + 1
        result.append((codes[0], codes[1], categories))
    return result


def _features(
    counts: IntArray, noisy: FloatArray, scales: FloatArray, targets: tuple[int, int]
) -> FloatArray:
    """(runs, 3): the traffic's c_t − c_t′, and Σ_i x_a,i/b_i and Σ_i x_b,i/b_i."""
    traffic = (counts[:, targets[0]] - counts[:, targets[1]]).astype(float)
    released = (noisy / scales[None, None, :]).sum(axis=2)
    return np.column_stack([traffic, released[:, 0], released[:, 1]])


def audit_release(
    countermeasure: Countermeasure,
    release: ReleaseMechanism,
    *,
    num_targets: int = 3,
    bound: float = 10.0,
    sql: str = RELEASE_AUDIT_SQL,
    runs: int = 4000,
    confidence: float = 0.95,
    delta: float = 1e-4,
    rng: np.random.Generator | int | None = None,
) -> ReleaseAuditReport:
    """Audit traffic and noisy release together: empirical lower bound vs the reported ε.

    Args:
        countermeasure: the traffic's: `Scramblers` (the tables have n rows, one
            batch) or `LocalFlooding` (the tables have one row).
        release: `dpcomm.Laplace` or `dpcomm.Gaussian`.
        num_targets: T >= 3, the compute nodes of the grouping set.
        bound: M: the SUM's values are clamped to [0, M].
        sql: the released query over ``t(k, v)``, grouped by ``k`` alone
            (`RELEASE_AUDIT_SQL`: one SUM).
        runs: runs per table (>= 100); half select events, half estimate them.
        confidence: probability that the lower bound is below the true ε, in (0, 1).
        delta: the traffic's δ (the plan's, as ``run_sql``'s ``delta``); the comparison is
            at the composed δ the report gives.
        rng: a numpy Generator, a seed, or None: the seed of the traffic's randomness streams
            (the release's noise is OpenDP's, never seeded).
    """
    from dpcomm.engine.released import release_report
    from dpcomm.plan.privacy import account_plan

    if not isinstance(countermeasure, Scramblers | LocalFlooding):
        raise InvalidParameterError(
            "countermeasure", "Scramblers(...) or LocalFlooding(...)", countermeasure
        )
    if not isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError("release", "dpcomm.Laplace(...) or Gaussian(...)", release)
    count = check_int("runs", runs, minimum=100)
    level = check_probability("confidence", confidence)
    if not 0.0 < level < 1.0:
        raise InvalidParameterError("confidence", "a number in (0, 1)", confidence)
    traffic_delta = check_delta("delta", delta)
    size = check_int("num_targets", num_targets, minimum=3)
    sources = countermeasure.batch_size if isinstance(countermeasure, Scramblers) else 1
    neighbours = release_neighbours(num_targets=size, num_sources=sources, bound=bound)
    generator = make_rng(rng)
    seed = int(generator.integers(0, 1 << 62))
    start = time.perf_counter()
    programs = [audited_program(t, release, neighbours, size, sql) for t in neighbours.tables()]
    privacy = account_plan(programs[0].plan, countermeasure, delta=traffic_delta)
    claimed = release_report(programs[0], privacy)
    noises = programs[0].release.noises if programs[0].release is not None else ()
    scales = np.array([noise.scale for noise in noises])
    keys = neighbours.keys[:2]
    step = max(1, CHUNK_SOURCES // sources)
    features: list[FloatArray] = []
    for side, program in enumerate(programs):
        # The two tables' runs draw from two rounds of one seed: independent runs.
        randomness = Randomness(seed, round=side)
        added = contributions(program, keys)
        parts: list[FloatArray] = []
        for low in range(0, count, step):
            high = min(count, low + step)
            done = release_runs(
                program,
                countermeasure,
                keys=keys,
                runs=high - low,
                randomness=randomness,
                first_run=low,
                added=added,
            )
            noisy = noisy_values(program, done.exact)
            parts.append(_features(done.counts, noisy, scales, neighbours.targets[:2]))
        features.append(np.concatenate(parts))
    events, num_events = estimate_events(
        _categorizations(features, count // 2), confidence=level, delta=claimed.composed_delta
    )
    best = max(events, key=lambda e: e.epsilon, default=None)
    return ReleaseAuditReport(
        countermeasure=countermeasure,
        release=release,
        neighbours=neighbours,
        num_targets=size,
        runs=count,
        confidence=level,
        delta=claimed.composed_delta,
        traffic_epsilon=privacy.guarantee.epsilon,
        release_epsilon=claimed.epsilon,
        reported_epsilon=claimed.epsilon_total,
        summed_epsilon=claimed.summed_epsilon,
        noise_scales=tuple((noise.output, noise.scale) for noise in noises),
        lower_bound=best.epsilon if best is not None else 0.0,
        events_tried=num_events,
        best_event=best if best is not None and best.epsilon > 0 else None,
        events=events,
        seconds=time.perf_counter() - start,
    )


__all__ = [
    "RELEASE_AUDIT_SQL",
    "ReleaseAuditReport",
    "ReleaseNeighbours",
    "ReleaseRuns",
    "audit_release",
    "audited_program",
    "contributions",
    "noisy_values",
    "release_neighbours",
    "release_runs",
]
