"""Statistical audit of the whole mechanism: the traffic and the noisy release, observed together.

An observer of a run with ``release=`` sees the traffic (what the countermeasure covers, ε1)
and the released values (what the noise covers, ε2); the report claims one guarantee for both
(``report.release.epsilon_total``: their PLD composition, or the paper's sum ε1 + ε2). This
audit runs the mechanism many times on two neighbouring tables, D and D′, that differ in one
source's row, and puts an empirical lower bound on ε next to that claim, with the statistics
of `dpcomm.experiments.audit` (events selected on half the runs, estimated on the other
half with Clopper-Pearson bounds, Bonferroni over the events).

**The tables** (`release_neighbours`, `candidate_pairs`): `RELEASE_AUDIT_SQL` (or another
query over ``t(k, v)`` grouped by ``k``: COUNT, SUM, AVG) released over the public key domain
{a, b, c}, ``v`` clamped to [lo, hi] (signed by default). Source 0 holds a value on key a in D
(beyond the bound when it is the bound of largest magnitude) and one on key b in D′; the other
n − 1 sources hold the same row, on c (``third-key``, ``signed``), on b (the row's new key,
``others-on-destination``: the counterexample's shape at T = 2) or on a (its old key,
``others-on-source``). a and b go to compute nodes 0 and T − 1, c to node 1 (node 0 when
T = 2). Given the traffic, the scramblers' redraws can move one other source's tuple in or out
of delivery on a's or b's node, which the last two pairs show. For a query releasing a
quantile, ``quantile-near-tie`` places a few others on a and b at two adjacent candidates of
the quantile's grid, a tie that the row's value tips (`near_tie`): where the others' values are
all equal, one value never moves a released median.

**The search**: every candidate pair is run on the first half of the runs of each table, its
view reduced in several ways (`_Reduction`) and its best event's bound computed there; the pair
with the largest is run on the second half, which estimates its selected events.

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
* the noise: the release layer's own noise (`dpcomm.release.noise._noisy`: OpenDP's
  measurement at the scale the program's release computed, after OpenDP's privacy map is
  checked), drawn for the cells of keys a and b of every run at once (on the selection half,
  once for every candidate pair: `_SharedNoise`). OpenDP's noise is never seeded (by design),
  so the lower bound varies from audit to audit; the traffic does not.

The observer's view is reduced to features, each cut into bins at the quantiles of the
selection half (`BINNINGS`, `RESIDUAL_BINNINGS`): the traffic's c_t − c_t′ (messages to a's
and b's compute nodes), Σ_i x_k,i/b_i for each observed key k (each released value over its
noise scale), and the same less its least-squares prediction from the counts per compute node
(the release given the traffic), the residuals also cut at each table's median. Dropping the
rest of the view (the other keys' values, the order of messages) is a post-processing: a lower
bound for the reduced view is one for the whole view.

**One aggregate** (``audit_release(aggregate=...)``): the view restricted to the traffic and
one released aggregate's noisy cells, against the claim for that view, the traffic composed
with that aggregate's noise alone (`_observed_claim` says why it is a valid bound). A fault
confined to one aggregate (``centred-own-row``) widens that aggregate's loss against its own
share of ε2, which the whole release's claim dilutes.

Seeded faults: `seeded_release_fault` builds the faulty program of ``old-sensitivity``
(`RELEASE_FAULT_KINDS`: the release calibrated to the sensitivity of the row's own change
alone, 2M for signed bounds, as before the joint view), which ``audit_release(fault=...)``
and ``dpcomm audit release --fault`` audit. The tests inject two more into the library code
this audit calls (a sensitivity computed half as large; the clamp skipped). Never an option
of a run; each faulty program still claims the declared guarantee.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import Table, table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.experiments.audit import (
    CHUNK_SOURCES,
    EVENTS_PER_DIRECTION,
    Categorization,
    EventEstimate,
    _select_events,
    block_source_messages,
    estimate_events,
    scrambler_runs,
)
from dpcomm.experiments.fault_kinds import RELEASE_FAULT_KINDS as RELEASE_FAULT_KINDS
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.progress import with_progress
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.mechanisms import (
    AggregateNoise,
    Gaussian,
    JointView,
    Laplace,
    ReleaseMechanism,
    Sensitivity,
    calibrate_noise,
)
from dpcomm.release.noise import Release
from dpcomm.release.quantile import QuantileNoise
from dpcomm.validation import check_delta, check_int, check_number, check_probability, make_rng

if TYPE_CHECKING:
    from dpcomm.plan.privacy import PlanGuarantee
    from dpcomm.release.compose import ReleaseComposition
    from dpcomm.release.report import ReleaseReport

#: The audited query by default: one noisy aggregate, so that the release's privacy loss sits
#: in two cells (a's SUM and b's), which few runs can show.
RELEASE_AUDIT_SQL = "SELECT k, SUM(v) AS s FROM t GROUP BY k"

#: Source 0's value in D, as a multiple of a bound: beyond it, so that clamping matters.
OUT_OF_BOUND_FACTOR = 50.0

#: The bounds [lo, hi] of the audited SUM by default: signed, where a row's value and another
#: source's can cancel or add up (the joint view's sensitivity is M + W = 3M there).
DEFAULT_BOUNDS = (-10.0, 10.0)

#: The audit's configuration by default (module docstring, "The default configuration"): one
#: scrambler of n = 2,000 sources without dummies over T = 2 compute nodes at σ = 0.04, and a
#: Laplace release of ε2 = 3, compared at δ = 10⁻²: the other sources' redraws hide the
#: audited message (ε1 = 0.30 at that δ) while each of them is the one other tuple the traffic
#: can move in or out of delivery, so that the release's sensitivity is what the runs show.
DEFAULT_COUNTERMEASURE = Scramblers(sampling_rate=0.04, batch_size=2000, num_dummies=0)
DEFAULT_RELEASE = Laplace(3.0)
DEFAULT_TARGETS = 2
DEFAULT_DELTA = 1e-2
DEFAULT_RUNS = 40_000

#: Quantile bins of (the traffic's feature, each released value's): coarse binnings keep
#: enough runs per category for few runs to show an event; the release alone, the traffic
#: alone, and both together (events are chosen among all of them on the selection half).
BINNINGS = ((1, 6), (8, 1), (2, 5), (4, 4))

#: Binnings of the released values *given the traffic* (each value less its least-squares
#: prediction from the counts per compute node, fitted on the selection half): (bins of the
#: traffic's feature, bins of each residual). The traffic can move other sources' tuples in
#: or out of delivery; given the counts, what remains of the released values is the row's
#: change and the coupled other tuple's.
RESIDUAL_BINNINGS = ((1, 4), (1, 6), (2, 4))

BoolArray = npt.NDArray[np.bool_]
Countermeasure = Scramblers | LocalFlooding

#: Messages (sources' and dummies') of the scramblers' runs simulated at once (`_traffic`).
#: Measured in whole default audits (n = 2,000, d = 0; the traffic's CPU, 2 cores shared):
#: 2^15 about 5% below 2^14, 2^16 half again above it (chunks alone, outside an audit, had
#: 2^16 fastest: the audit's other arrays change how the allocator serves the chunks').
CHUNK_MESSAGES = 1 << 15

#: Names of the candidate neighbouring pairs, in the order they are tried (`candidate_pairs`;
#: ``quantile-near-tie`` only for a query releasing a quantile).
PAIR_NAMES = (
    "third-key",
    "signed",
    "others-on-destination",
    "others-on-source",
    "quantile-near-tie",
)

#: ``quantile-near-tie``: the other sources' values at each of the two middle candidates of
#: key b's cell (and of key a's, two more at the one farther from the row): few enough that
#: the traffic rarely leaves one of them out, enough that no other candidate competes.
TIE_VALUES = 8


@dataclass(frozen=True)
class NeighbourPair:
    """How source 0's row and the other sources' rows are laid out on the keys (a, b, c).

    Attributes:
        name: one of `PAIR_NAMES`.
        values: source 0's value in D (on key a) and in D′ (on key b), before clamping.
        others: the other sources' key (0 = a, 1 = b, 2 = c) and value (those not in
            ``placed``).
        placed: groups of other sources placed first, each (key, value, how many).
    """

    name: str
    values: tuple[float, float]
    others: tuple[int, float]
    placed: tuple[tuple[int, float, int], ...] = ()

    @property
    def num_placed(self) -> int:
        """The other sources in ``placed``."""
        return sum(count for _, _, count in self.placed)


def candidate_pairs(
    bounds: tuple[float, float], *, quantile: bool = False
) -> tuple[NeighbourPair, ...]:
    """The neighbouring pairs the audit tries for values clamped to ``bounds``.

    With u the bound of largest magnitude M (hi on a tie) and w the other one (|u − w| = W),
    source 0 holds (a, 50·u) in D (beyond the bound, clamped to u) and:

    * ``third-key``: (b, u) in D′, the others (c, (lo + hi)/2): the row moves by 2M, the
      others away from it (on a third compute node when T >= 3);
    * ``signed``: (b, w) in D′, the others as above: the row changes sign (only when
      lo < 0 < hi);
    * ``others-on-destination``: (b, w) in D′, the others (b, u): the traffic can move one
      other tuple of key b in or out of delivery, which adds u − w to the row's change in b's
      cell (M + W in all);
    * ``others-on-source``: source 0 holds (a, 50·w) in D and (b, u) in D′, the others (a, u):
      likewise in a's cell.

    With T = 2, ``others-on-destination`` is the shape of the counterexample to a sensitivity
    of 2M for signed bounds (docs/audit.md).

    With ``quantile`` (a query releasing MEDIAN or QUANTILE_CONT), one more:

    * ``quantile-near-tie``: (b, u) in D′; `TIE_VALUES` others at each of the two middle
      candidates of the quantile's grid on b, as many on a plus two more at the candidate
      farther from u, the rest on c: b's median is a tie between the two candidates without
      the row, a's is a tie with it, and the row's value (beyond both) tips each tie by a
      whole score step (`near_tie`).
    """
    low, high = bounds
    far, near = (high, low) if abs(high) >= abs(low) else (low, high)
    middle = (low + high) / 2.0
    beyond = OUT_OF_BOUND_FACTOR
    pairs = [NeighbourPair("third-key", (beyond * far, far), (2, middle))]
    if low < 0.0 < high:
        pairs.append(NeighbourPair("signed", (beyond * far, near), (2, middle)))
    pairs.append(NeighbourPair("others-on-destination", (beyond * far, near), (1, far)))
    pairs.append(NeighbourPair("others-on-source", (beyond * near, far), (0, far)))
    if quantile:
        pairs.append(near_tie((low, high), far))
    return tuple(pairs)


def near_tie(bounds: tuple[float, float], row: float) -> NeighbourPair:
    """``quantile-near-tie``: the row's value ``row`` (a bound) tips a median's tie.

    Values are snapped to the grid of `QUANTILE_CANDIDATES` candidates over ``bounds``
    (`dpcomm.release.quantile.candidate_grid`); c_j and c_{j+1} are its two middle ones. A
    median's score of a candidate is |#{x < c} − #{x > c}|/2; with only values at c_j and
    c_{j+1} in a cell, every other candidate scores about half the cell's values and the two
    compete. A value beyond both (the row, clamped to a bound) raises one's score by ½ and
    lowers the other's by ½: a whole step between them, the most one value can move them
    (OpenDP's map charges it). So b holds `TIE_VALUES` others at each (a tie in D, tipped
    toward the row's side in D′), and a holds as many at the one nearer the row and two
    more at the other (a tie in D, with the row; tipped away from it in D′).
    """
    from dpcomm.queries.analyst import QUANTILE_CANDIDATES
    from dpcomm.release.quantile import candidate_grid

    grid = candidate_grid(bounds[0], bounds[1], QUANTILE_CANDIDATES)
    middle = (len(grid) - 1) // 2
    lower, upper = grid[middle], grid[middle + 1]
    nearer, farther = (upper, lower) if row > upper else (lower, upper)
    placed = (
        (0, nearer, TIE_VALUES),
        (0, farther, TIE_VALUES + 2),
        (1, lower, TIE_VALUES),
        (1, upper, TIE_VALUES),
    )
    return NeighbourPair(
        "quantile-near-tie",
        (OUT_OF_BOUND_FACTOR * row, row),
        (2, (bounds[0] + bounds[1]) / 2.0),
        placed,
    )


@dataclass(frozen=True)
class ReleaseNeighbours:
    """The two neighbouring tables of the audit.

    Attributes:
        keys: (a, b, c): source 0's key in D, its key in D′, a third key.
        targets: the compute node of each of them (t, t′, t″).
        bounds: [lo, hi]: the SUM's values are clamped to it.
        num_sources: S, the table's rows (n for scramblers: one batch).
        pair: where source 0's row and the others' rows are (`candidate_pairs`).
    """

    keys: tuple[str, str, str]
    targets: tuple[int, int, int]
    bounds: tuple[float, float]
    num_sources: int
    pair: NeighbourPair

    @property
    def bound(self) -> float:
        """M = max(|lo|, |hi|)."""
        return max(abs(self.bounds[0]), abs(self.bounds[1]))

    @property
    def cells(self) -> tuple[int, ...]:
        """The keys whose released cells the audit observes: a and b, and c if others are on c.

        Not c when other sources are placed on a and b (``quantile-near-tie``): the rest, on
        c, hold one value, whose median no one value moves.
        """
        return (0, 1, 2) if self.pair.others[0] == 2 and not self.pair.placed else (0, 1)

    def describe(self) -> str:
        """One line for reports."""
        low, high = self.bounds
        first, second = self.pair.values
        text = (
            f"{self.pair.name}: source 0 holds ({self.keys[0]!r}, {first:g}) in D, clamped to "
            f"[{low:g}, {high:g}], and ({self.keys[1]!r}, {second:g}) in D′"
        )
        for key, value, count in self.pair.placed:
            text += f"; {count} others hold ({self.keys[key]!r}, {value:g})"
        rest = self.num_sources - 1 - self.pair.num_placed
        if rest > 0:
            key, value = self.pair.others
            held = f"the {rest} others" if not self.pair.placed else f"the other {rest}"
            text += f"; {held} hold ({self.keys[key]!r}, {value:g})"
        return text

    def tables(self) -> tuple[Table, Table]:
        """D and D′ (FROM name ``t``): source 0, then the ``placed`` others, then the rest."""
        groups = [
            *self.pair.placed,
            (*self.pair.others, self.num_sources - 1 - self.pair.num_placed),
        ]
        other_keys = [self.keys[key] for key, _, count in groups for _ in range(count)]
        other_values = [value for _, value, count in groups for _ in range(count)]
        tables = []
        for own, row in zip((0, 1), self.pair.values, strict=True):
            keys = np.array([self.keys[own], *other_keys], dtype=object)
            values = np.array([row, *other_values])
            tables.append(table_from_arrays("t", {"k": keys, "v": values}))
        return tables[0], tables[1]


def release_neighbours(
    *,
    num_targets: int,
    num_sources: int,
    bound: float | None = None,
    bounds: tuple[float, float] | None = None,
    pair: str = "third-key",
) -> ReleaseNeighbours:
    """The audit's tables: keys a and b on compute nodes 0 and T − 1, c on node 1 (T >= 3).

    With T = 2, c is on node 0, with a. ``bounds`` are the SUM's [lo, hi] (``bound`` = M gives
    [0, M]; default `DEFAULT_BOUNDS`); ``pair`` one of `PAIR_NAMES` (`candidate_pairs`). The
    compute node of a key is a public hash of the key
    (`dpcomm.queries.groupby.partition_keys`); the keys are the first of ``k0``, ``k1``,
    ... to fall on each node.
    """
    from dpcomm.queries.groupby import partition_keys

    size = check_int("num_targets", num_targets, minimum=2)
    count = check_int("num_sources", num_sources, minimum=1)
    limits = _check_bounds(bound, bounds)
    pairs = candidate_pairs(limits, quantile=True)
    chosen = [p for p in pairs if p.name == pair]
    if not chosen:
        raise InvalidParameterError("pair", f"one of {', '.join(p.name for p in pairs)}", pair)
    if count - 1 < chosen[0].num_placed:
        raise InvalidParameterError(
            "num_sources", f"at least {chosen[0].num_placed + 1} for the pair {pair}", count
        )
    wanted = (0, size - 1, 1 if size >= 3 else 0)
    found: list[str | None] = [None, None, None]
    start = 0
    while None in found:
        names = [f"k{i}" for i in range(start, start + 64)]
        nodes = partition_keys(
            table_from_arrays("keys", {"k": np.array(names, dtype=object)}), size
        )
        for name, node in zip(names, nodes.tolist(), strict=True):
            slot = next((i for i, t in enumerate(wanted) if t == node and found[i] is None), None)
            if slot is not None:
                found[slot] = name
        start += 64
    a, b, c = (str(name) for name in found)
    return ReleaseNeighbours((a, b, c), wanted, limits, count, chosen[0])


def _check_bounds(bound: float | None, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """[lo, hi] from ``bounds``, or [0, ``bound``], or `DEFAULT_BOUNDS`."""
    if bound is not None and bounds is not None:
        raise InvalidParameterError("bounds", "bound= or bounds=, not both", (bound, bounds))
    if bound is not None:
        return (0.0, check_number("bound", bound, above=0.0))
    if bounds is None:
        return DEFAULT_BOUNDS
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidParameterError("bounds", "a pair (lo, hi)", bounds)
    low = check_number("bounds", bounds[0])
    high = check_number("bounds", bounds[1])
    if not low < high:
        raise InvalidParameterError("bounds", "a pair (lo, hi) with lo < hi", bounds)
    return (low, high)


def audited_program(
    table: Table,
    release: ReleaseMechanism,
    neighbours: ReleaseNeighbours,
    num_targets: int,
    sql: str = RELEASE_AUDIT_SQL,
    *,
    fault: str = "none",
) -> AggregateProgram:
    """The program a run of ``sql`` with ``release`` builds for ``table`` (as run_sql does).

    ``sql`` reads table ``t``, groups by ``k`` alone and releases COUNT, SUM or AVG of ``v``.
    ``fault``: ``"none"``, or one of `RELEASE_FAULT_KINDS` (`seeded_release_fault`).
    """
    from dpcomm.queries.sql import bind_sql
    from dpcomm.release.noise import noisy_program

    bounds = {"v": neighbours.bounds}
    bound = bind_sql(sql, table, bounds=bounds)
    clamped = {column for _, column, _, _ in bound.clamps} | {q[1] for q in bound.quantiles}
    program = noisy_program(
        sql,
        table,
        num_targets=num_targets,
        release=release,
        bounds=bounds if "v" in clamped else None,  # a bound nothing reads is refused
        keys={"k": list(neighbours.keys)},
    )
    if program.query.grouping_sets != (("k",),):
        raise InvalidParameterError("sql", "a query over t grouped by k alone (GROUP BY k)", sql)
    return program if fault == "none" else seeded_release_fault(program, fault)


def seeded_release_fault(program: AggregateProgram, kind: str) -> AggregateProgram:
    """``program`` with the seeded fault ``kind``; it still claims the declared guarantee.

    ``old-sensitivity``: the release's sensitivity computed as if each tuple arrived
    independently of the others given the traffic, the sensitivity before the joint view of
    traffic and release: every grouping set's `JointView` is ``own-row`` (max(2M, W) for a
    SUM, 2M for signed bounds, against M + W), and each aggregate's noise is calibrated to it
    by the library's own calibration, so OpenDP's privacy map, checked against that
    sensitivity, agrees. The release keeps its mechanism (ε2, δ2), its views and its
    countermeasure's coverage, hence the report's claim (ε1, ε2 and their composition) is
    the correct program's. Under key selection the threshold would keep the correct
    sensitivity: refused.

    ``quantile-own-row``: only the quantiles (MEDIAN, QUANTILE_CONT) calibrated as if only
    the replaced row moved (``own-row``: d = 2 values per grouping set, against 3 under
    scramblers with sampling), at their own share of ε; the other aggregates keep their
    noise. Refused for a query without a quantile.

    ``quantile-add-remove``: likewise, the quantiles calibrated to d = 1 per grouping set, a
    row taken as one value added or removed (OpenDP's default relation, the release alone),
    against 2 (the row's replacement) or 3 (and one other source's value) per grouping set.

    ``quantile-uncharged``: the quantiles drawn as the library draws them, but left out of
    the release's composition (`_UnchargedQuantiles`: ``charged`` holds the noisy COUNTs and
    SUMs only), as a consumer that composes ``release.noises`` rather than
    ``release.charged`` would: the report, a budget's charge and the claim count the traffic
    and the other aggregates alone. This fault's claim is therefore not the declared one but
    what the faulty program reports. Refused for a query without a quantile, or without a
    noisy COUNT or SUM beside it.

    ``centred-own-row``: only the centred sums (a query releasing COUNT(v) beside SUM(v), or
    AVG(v), with bounds whose midpoint is not 0) calibrated as if only the replaced row moved
    (``own-row``: hi − lo, against 1.5 (hi − lo) under scramblers with sampling); the other
    aggregates keep their noise. Refused for a query without a centred sum.
    """
    from dpcomm.release.noise import _released_aggregates
    from dpcomm.release.quantile import quantile_distance

    if kind not in RELEASE_FAULT_KINDS:
        raise InvalidParameterError("fault", f"one of {', '.join(RELEASE_FAULT_KINDS)}", kind)
    release = program.release
    if not isinstance(release, Release) or release.selection is not None:
        raise InvalidParameterError(
            "program", "a program with a noisy release over public key domains", program
        )
    views: list[JointView] = ["own-row"] * len(program.query.grouping_sets)
    if kind == "quantile-own-row":
        return _quantiles_at(
            program, release, quantile_distance(program.query.grouping_sets, views)
        )
    if kind == "quantile-add-remove":
        return _quantiles_at(program, release, len(program.query.grouping_sets))
    if kind == "quantile-uncharged":
        if not (release.quantiles and release.noises):
            raise InvalidParameterError(
                "fault",
                "a query with MEDIAN or QUANTILE_CONT beside a noisy COUNT or SUM (the "
                "composition needs one)",
                kind,
            )
        return replace(program, release=_UnchargedQuantiles(**_fields_of(release)), _released={})
    noises = calibrate_noise(
        release.mechanism,
        _released_aggregates(program.query, views),
        shared_blanket=release.shared_blanket,
        uses=program.query.value_uses,
    )
    if kind == "centred-own-row":
        outputs = {o.name: o.column for o in program.query.outputs}
        centred = dict(program.query.centres)
        chosen = {n.output for n in noises if n.function == "sum" and outputs[n.output] in centred}
        if not chosen:
            raise InvalidParameterError(
                "fault", "a query with a centred SUM (COUNT(v) or AVG(v) beside it)", kind
            )
        noises = tuple(
            _rescaled(correct, faulty.sensitivity) if correct.output in chosen else correct
            for faulty, correct in zip(noises, release.noises, strict=True)
        )
    return replace(program, release=replace(release, noises=noises), _released={})


@dataclass(frozen=True)
class _UnchargedQuantiles(Release):
    """A release whose quantiles are drawn but not composed (``quantile-uncharged``)."""

    @property
    def charged(self) -> tuple[AggregateNoise, ...]:
        """The noisy COUNTs and SUMs only: the quantiles' (ε_i, δ_i) left out (the fault)."""
        return self.noises


def _fields_of(release: Release) -> dict[str, Any]:
    """``release``'s fields by name (to rebuild it as another class)."""
    return {f.name: getattr(release, f.name) for f in fields(release)}


def _quantiles_at(program: AggregateProgram, release: Release, distance: int) -> AggregateProgram:
    """``program`` whose quantiles are calibrated to the faulty d ``distance``.

    Each at its own share of ε (`seeded_release_fault`).
    """
    from dpcomm.release.quantile import calibrate_quantile

    if not release.quantiles:
        raise InvalidParameterError("fault", "a query with MEDIAN or QUANTILE_CONT", "none")
    quantiles = tuple(
        calibrate_quantile(
            q.output,
            q.epsilon,
            q.alpha,
            q.candidates,
            distance,
            q.delta,
            shared_blanket=q.shared_blanket,
        )
        for q in release.quantiles
    )
    return replace(program, release=replace(release, quantiles=quantiles), _released={})


def _rescaled(noise: AggregateNoise, sensitivity: Sensitivity) -> AggregateNoise:
    """``noise`` at its own share of ε, its scale calibrated to ``sensitivity`` instead."""
    old, new = (
        (noise.sensitivity.l1, sensitivity.l1)
        if noise.delta == 0.0
        else (noise.sensitivity.l2, sensitivity.l2)
    )
    return replace(noise, sensitivity=sensitivity, scale=noise.scale * new / old)


def contributions(program: AggregateProgram, keys: tuple[str, ...]) -> FloatArray:
    """(S, len(keys), A): what each source's tuple adds to each key's released aggregates.

    Each source's row alone is evaluated by the library (`evaluate_grouping_set`, over
    the program's projected rows, hence clamped as a run clamps them); A follows the order of
    the release's noises, then each quantile's bins (the candidates' hidden COUNTs). A NULL
    aggregate (no value) adds 0, as the release counts it.
    """
    from dpcomm.queries.groupby import evaluate_grouping_set

    release = program.release
    table = program.table
    if release is None or table is None:
        raise InvalidParameterError("program", "a program with a release and its rows", program)
    column = program.query.grouping_sets[0][0]
    outputs = [noise.output for noise in release.noises]
    outputs += [name for quantile in program.query.quantiles for name in quantile[5]]
    result = np.zeros((table.num_rows, len(keys), len(outputs)))
    # A source's contribution depends on its row alone: each distinct row is evaluated once.
    rows = list(
        zip(
            *(
                [
                    None if null else value
                    for value, null in zip(c.values.tolist(), c.is_null, strict=True)
                ]
                for c in table.columns
            ),
            strict=True,
        )
    )
    first: dict[tuple[object, ...], int] = {}
    for source, row in enumerate(rows):
        if row in first:
            result[source] = result[first[row]]
            continue
        first[row] = source
        alone = np.zeros(table.num_rows, dtype=bool)
        alone[source] = True
        for evaluated in evaluate_grouping_set(program.query, table, 0, alone):
            key = evaluated[column]
            if isinstance(key, str) and key in keys:
                values = [evaluated[o] for o in outputs]
                result[source, keys.index(key)] = [
                    float(v) if isinstance(v, int | float) else 0.0 for v in values
                ]
    return result


def exact_results(delivered: BoolArray, added: FloatArray) -> FloatArray:
    """(runs, keys, A): each run's exact aggregates, its delivered sources' ``added`` summed.

    Sources with the same contribution are counted together (the runs' delivered sources of
    each distinct contribution, times it), which is the sum over sources without a
    (runs × S) floating-point product.
    """
    sources = added.shape[0]
    flat = added.reshape(sources, -1)
    distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    sizes = np.bincount(inverse, minlength=distinct.shape[0])
    largest = int(np.argmax(sizes))
    total = np.count_nonzero(delivered, axis=1)
    exact = np.zeros((delivered.shape[0], flat.shape[1]))
    rest = total.copy()
    for group in range(distinct.shape[0]):
        if group == largest:
            continue
        hits = np.count_nonzero(delivered[:, inverse == group], axis=1)
        rest -= hits
        exact += hits[:, None] * distinct[group][None, :]
    exact += rest[:, None] * distinct[largest][None, :]
    return exact.reshape(delivered.shape[0], *added.shape[1:])


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


def traffic_runs(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    *,
    runs: int,
    randomness: Randomness,
    first_run: int = 0,
) -> tuple[IntArray, BoolArray]:
    """The traffic of runs ``first_run`` … of ``program``: counts (runs, T), delivered (runs, S).

    What `release_runs` adds up over; it depends on the table only through its sources' true
    compute nodes, so tables with the same keys' nodes share it.
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
        messages = block_source_messages(
            tiled,
            countermeasure,
            first_run=first,
            num_targets=size,
            randomness=randomness,
            flow=flow,
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
    return counts, delivered


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
    counts, delivered = traffic_runs(
        program, countermeasure, runs=runs, randomness=randomness, first_run=first_run
    )
    if added is None:
        added = contributions(program, keys)
    exact = exact_results(delivered, added)
    return ReleaseRuns(counts=counts, delivered=delivered, exact=exact)


def noisy_values(
    program: AggregateProgram, exact: FloatArray, aggregates: Sequence[int] | None = None
) -> FloatArray:
    """``exact`` (runs, keys, A) plus the release's noise: OpenDP's, as the result node adds it.

    Each aggregate's cells of every run are one vector given to the release layer's noise
    (`dpcomm.release.noise._noisy`): independent noise per cell, at the aggregate's
    scale, after OpenDP's privacy map is checked against the aggregate's share of ε2. Each
    quantile (its bins' counts in ``exact``) is drawn per cell as the result node draws it;
    the result has one column per noisy aggregate, then one per quantile, or one per index
    of ``aggregates`` (in that order: the others are not drawn).
    """
    from dpcomm.release.noise import _noisy

    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a release", program)
    count = len(release.noises)
    wanted = list(range(count + len(release.quantiles))) if aggregates is None else aggregates
    noisy = np.empty((*exact.shape[:2], len(wanted)))
    for column, index in enumerate(wanted):
        if index < count:
            values = exact[:, :, index].ravel().tolist()
            drawn = np.asarray(_noisy(release.noises[index], values), dtype=float)
            noisy[:, :, column] = drawn.reshape(exact.shape[:2])
            continue
        quantile = release.quantiles[index - count]
        size = len(quantile.candidates)
        start = count + (index - count) * size
        noisy[:, :, column] = _drawn_quantiles(quantile, exact[:, :, start : start + size])
    return noisy


def _drawn_quantiles(quantile: QuantileNoise, bins: FloatArray) -> FloatArray:
    """(runs, keys) released quantiles from each cell's candidates' counts (``bins``).

    The release layer's draw (`dpcomm.release.quantile.released_quantiles`, OpenDP's map
    checked first), once per distinct counts with as many draws as cells have them.
    """
    from dpcomm.release.quantile import released_quantiles

    flat = np.rint(bins.reshape(-1, bins.shape[-1])).astype(np.int64)
    distinct, inverse = np.unique(flat, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    drawn = np.empty(flat.shape[0])
    for group, counts in enumerate(distinct):
        cells = np.flatnonzero(inverse == group)
        expanded = [0] * (2 * counts.size - 1)
        expanded[::2] = counts.tolist()
        drawn[cells] = released_quantiles(quantile, expanded, cells.size)
    return drawn.reshape(bins.shape[:2])


@dataclass(frozen=True)
class PairSelection:
    """One candidate neighbouring pair and how well it did on the selection half.

    Attributes:
        name: the pair's name (`PAIR_NAMES`).
        selection_bound: the best event's lower bound on the selection half (at the
            estimation's Bonferroni level): the pair with the largest one is estimated.
    """

    name: str
    selection_bound: float


@dataclass(frozen=True, kw_only=True)
class _AuditedClaim:
    """What an audited run claims, which the audit's inputs and its report both hold.

    Attributes:
        num_targets: T.
        runs: runs per table.
        confidence: the confidence of the lower bound.
        delta: the composed δ the run's release report gives (δ1 + δ2).
        traffic_epsilon: ε1, as the run reports it.
        release_epsilon: ε2, as the run's release report gives it.
        reported_epsilon: the run's claim against an observer of both.
        summed_epsilon: ε1 + ε2.
        noise_scales: each released aggregate, as the report describes it, and its scale.
        fault: ``"none"``, or the seeded fault audited.
        aggregate: the one released aggregate observed (as the report describes it), or None
            for every one (`audit_release`'s ``aggregate``).
    """

    num_targets: int
    runs: int
    confidence: float
    delta: float
    traffic_epsilon: float
    release_epsilon: float
    reported_epsilon: float
    summed_epsilon: float
    noise_scales: tuple[tuple[str, float], ...]
    fault: str = "none"
    aggregate: str | None = None


@dataclass(frozen=True)
class ReleaseAuditReport(_AuditedClaim):
    """The audit of traffic and release together.

    Attributes:
        countermeasure: the traffic's countermeasure.
        release: the release's mechanism (its claimed ε2, δ2).
        neighbours: the neighbouring tables the search chose (estimated on the second half).
        num_targets: T.
        runs: runs per table (half select pairs and events, half estimate them).
        confidence: the confidence of the lower bound.
        delta: δ of the comparison: the composed δ the report gives (δ1 + δ2).
        traffic_epsilon: ε1, the traffic's, as the run reports it.
        release_epsilon: ε2, the release's.
        reported_epsilon: the run's claim against an observer of both
            (``report.release.epsilon_total``).
        summed_epsilon: ε1 + ε2.
        noise_scales: each released aggregate (as the run's report describes it, e.g.
            ``SUM(v clamped to [-10, 10])``) and the scale of its noise.
        lower_bound: the empirical lower bound on ε (holds with probability >= confidence).
        events_tried: events estimated (the Bonferroni factor).
        best_event: the event that gave the lower bound, or None if none beat 0.
        events: every estimated event.
        pairs: every candidate pair tried on the selection half, with its selection bound.
        fault: ``"none"``, or the seeded fault audited (`RELEASE_FAULT_KINDS`); the
            reported ε is then the declared mechanism's, which the faulty one claims.
        aggregate: None when the observer sees every released aggregate; else the one
            aggregate observed (as ``noise_scales`` describes it), and the claim (ε2, the
            reported and summed ε, δ) is the traffic's composed with that aggregate's noise
            alone (`audit_release`'s ``aggregate``).
        seconds: wall-clock time of the audit.
    """

    countermeasure: Countermeasure
    release: ReleaseMechanism
    neighbours: ReleaseNeighbours
    lower_bound: float
    events_tried: int
    best_event: EventEstimate | None
    events: tuple[EventEstimate, ...]
    pairs: tuple[PairSelection, ...] = ()
    seconds: float = field(default=0.0, compare=False)

    @property
    def passed(self) -> bool:
        """PASS when the lower bound does not exceed the reported composed ε."""
        return self.lower_bound <= self.reported_epsilon + 1e-9


def _bins(selection: FloatArray, count: int) -> FloatArray:
    """Inner edges of ``count`` quantile bins of ``selection`` (ties merged)."""
    inner = np.quantile(selection, np.linspace(0.0, 1.0, count + 1)[1:-1])
    return np.unique(inner)


@dataclass(frozen=True, eq=False)
class _View:
    """What the audit keeps of runs of one table: the counts, and each observed cell's value.

    ``released`` (runs, cells): Σ_i x_k,i / b_i for each observed key k (`ReleaseNeighbours.cells`).
    """

    counts: IntArray
    released: FloatArray

    def __len__(self) -> int:
        return int(self.counts.shape[0])

    def join(self, other: _View) -> _View:
        return _View(
            np.concatenate([self.counts, other.counts]),
            np.concatenate([self.released, other.released]),
        )


@dataclass(frozen=True, eq=False)
class _Reduction:
    """The reduction of a view to categories, fitted on the selection half of both tables.

    The features are the traffic's c_t − c_t′, each observed cell's released value, and each
    value less its least-squares prediction from the counts per compute node (the residual:
    the release given the traffic). Each binning cuts some of them at quantiles of both
    tables' selection halves; a run's category is its bin of each.
    """

    targets: tuple[int, int]
    coefficients: FloatArray
    binnings: tuple[tuple[tuple[int, FloatArray], ...], ...]

    @classmethod
    def fit(cls, selection: tuple[_View, _View], targets: tuple[int, int]) -> _Reduction:
        counts = np.concatenate([view.counts for view in selection]).astype(float)
        released = np.concatenate([view.released for view in selection])
        design = np.column_stack([np.ones(counts.shape[0]), counts])
        coefficients = np.linalg.lstsq(design, released, rcond=None)[0]
        partial = cls(targets, coefficients, ())
        features = np.concatenate([partial.features(view) for view in selection])
        cells = released.shape[1]
        traffic, raw, residual = 0, list(range(1, 1 + cells)), list(range(1 + cells, 1 + 2 * cells))
        specs: list[tuple[tuple[int, int], ...]] = []
        for traffic_bins, release_bins in BINNINGS:
            specs.append(((traffic, traffic_bins), *((c, release_bins) for c in raw[:2])))
        for traffic_bins, release_bins in RESIDUAL_BINNINGS:
            specs.append(((traffic, traffic_bins), *((c, release_bins) for c in residual[:2])))
        if cells > 2:
            specs.append(tuple((c, 3) for c in residual))
        binnings = tuple(
            tuple((column, _bins(features[:, column], bins)) for column, bins in spec if bins > 1)
            for spec in specs
        )
        # Each residual cut at both tables' medians: under Laplace noise shifted by s, the
        # runs beyond the farther median have likelihood ratio e^s, and half the runs.
        sides = [partial.features(view) for view in selection]
        medians = tuple(
            (c, np.unique([np.median(side[:, c]) for side in sides])) for c in residual[:2]
        )
        return cls(targets, coefficients, (*binnings, medians))

    def features(self, view: _View) -> FloatArray:
        """(runs, 1 + 2·cells): c_t − c_t′, the released values, their residuals."""
        traffic = (view.counts[:, self.targets[0]] - view.counts[:, self.targets[1]]).astype(float)
        design = np.column_stack([np.ones(len(view)), view.counts.astype(float)])
        residual = view.released - design @ self.coefficients
        return np.column_stack([traffic, view.released, residual])

    def categorizations(self, views: tuple[_View, _View]) -> list[Categorization]:
        """Each run's category under each binning (both tables, in run order)."""
        features = [self.features(view) for view in views]
        result: list[Categorization] = []
        for binning in self.binnings:
            codes = [np.zeros(len(view), dtype=np.int64) for view in views]
            categories = 1
            for column, edges in binning:
                for side, values in enumerate(features):
                    found = np.searchsorted(edges, values[:, column], side="right")
                    codes[side] = codes[side] * (edges.shape[0] + 1) + found
                categories *= edges.shape[0] + 1
            result.append((codes[0], codes[1], categories))
        return result


def _selection_bound(
    categorizations: list[Categorization], *, confidence: float, delta: float
) -> float:
    """The best event's lower bound on these (selection) runs, at the estimation's level."""
    alpha = (1.0 - confidence) / (4 * EVENTS_PER_DIRECTION)
    best = 0.0
    for codes0, codes1, categories in categorizations:
        counts = [np.bincount(c, minlength=categories) for c in (codes0, codes1)]
        runs = codes0.shape[0]
        for a, b in ((0, 1), (1, 0)):
            for bound, _ in _select_events(counts[a], counts[b], runs, alpha, delta, 1):
                best = max(best, bound)
    return best


def _views(
    neighbours: ReleaseNeighbours,
    programs: tuple[AggregateProgram, AggregateProgram],
    traffic: tuple[tuple[IntArray, BoolArray], tuple[IntArray, BoolArray]],
    scales: FloatArray,
    observed: tuple[int, ...],
    noise: _SharedNoise | None = None,
) -> tuple[_View, _View]:
    """Both tables' views of runs whose traffic is ``traffic``: the release's noise drawn.

    Each observed cell's feature is Σ_i x_k,i / b_i over the ``observed`` aggregates (indices
    among the release's noisy aggregates, then its quantiles) alone. ``noise``: the additive
    noise of each table's runs, drawn once for every pair of the selection half.
    """
    columns = list(observed)
    keys = tuple(neighbours.keys[k] for k in neighbours.cells)
    views = []
    for side, (program, (counts, delivered)) in enumerate(zip(programs, traffic, strict=True)):
        exact = exact_results(delivered, contributions(program, keys))
        if noise is not None and noise.applies(program):
            noisy = exact[:, :, columns] + noise.drawn(side, program, exact.shape[:2])
        else:
            noisy = noisy_values(program, exact, observed)
        views.append(_View(counts, (noisy / scales[None, None, columns]).sum(axis=2)))
    return views[0], views[1]


@dataclass
class _SharedNoise:
    """The selection half's additive noise, drawn once per table and shape for every pair.

    The pairs of the selection half are only compared with one another (the pair and its
    reduction are chosen there; the estimation half draws afresh), so they may share the
    release's noise: each pair's runs still see independent noise per run and cell. OpenDP's
    noise is drawn at zero and added to the exact values (the same law up to the last
    rounding of a float): a sixth of the draws, which are most of an audit's time. Quantiles
    are not additive and are drawn per pair.
    """

    observed: tuple[int, ...]
    cells: int
    drawn_by_runs: dict[tuple[int, int], FloatArray] = field(default_factory=dict)

    def applies(self, program: AggregateProgram) -> bool:
        """Whether every observed aggregate's noise is additive (no quantile)."""
        release = program.release
        return release is not None and all(i < len(release.noises) for i in self.observed)

    def drawn(self, side: int, program: AggregateProgram, shape: tuple[int, ...]) -> FloatArray:
        """Table ``side``'s noise for (runs, cells) ``shape``: drawn by ``program`` once.

        Drawn for `cells` cells, the most any pair observes; a pair observing fewer takes the
        first ones.
        """
        key = (side, shape[0])
        if key not in self.drawn_by_runs:
            zeros = np.zeros((shape[0], max(self.cells, shape[1]), max(self.observed) + 1))
            self.drawn_by_runs[key] = noisy_values(program, zeros, self.observed)
        return self.drawn_by_runs[key][:, : shape[1]]


def _traffic(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    *,
    first: int,
    stop: int,
    randomness: Randomness,
) -> tuple[IntArray, BoolArray]:
    """`traffic_runs` of runs ``first`` … ``stop − 1``, in chunks.

    Under scramblers a chunk holds at most `CHUNK_MESSAGES` messages (the n sources' and the
    d dummies of each run), else `CHUNK_SOURCES` sources. A run's traffic does not depend on
    the runs simulated with it.
    """
    table = program.table
    sources = 1 if table is None else table.num_rows
    if isinstance(countermeasure, Scramblers):
        step = max(1, CHUNK_MESSAGES // (sources + countermeasure.num_dummies))
    else:
        step = max(1, CHUNK_SOURCES // sources)
    counts: list[IntArray] = []
    delivered: list[BoolArray] = []
    for low in range(first, stop, step):
        high = min(stop, low + step)
        done = traffic_runs(
            program, countermeasure, runs=high - low, randomness=randomness, first_run=low
        )
        counts.append(done[0])
        delivered.append(done[1])
    return np.concatenate(counts), np.concatenate(delivered)


def _checked_mechanisms(
    countermeasure: Countermeasure | None, release: ReleaseMechanism | None, fault: str
) -> tuple[Scramblers | LocalFlooding, Laplace | Gaussian]:
    """The audited countermeasure and release (the defaults for None); a fault's name checked."""
    if countermeasure is None:
        countermeasure = DEFAULT_COUNTERMEASURE
    if release is None:
        release = DEFAULT_RELEASE
    if not isinstance(countermeasure, Scramblers | LocalFlooding):
        raise InvalidParameterError(
            "countermeasure", "Scramblers(...) or LocalFlooding(...)", countermeasure
        )
    if not isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError("release", "dpcomm.Laplace(...) or Gaussian(...)", release)
    if fault != "none" and fault not in RELEASE_FAULT_KINDS:
        raise InvalidParameterError(
            "fault", f"'none' or one of {', '.join(RELEASE_FAULT_KINDS)}", fault
        )
    return countermeasure, release


def _candidate_neighbours(
    limits: tuple[float, float],
    num_targets: int,
    num_sources: int,
    pairs: Sequence[str] | None,
    *,
    quantile: bool,
) -> list[ReleaseNeighbours]:
    """The neighbouring tables of each candidate pair named in ``pairs`` (default: every one).

    ``quantile``: the query releases a quantile (``quantile-near-tie`` is among the pairs,
    when the table has the sources it places).
    """
    names = [
        p.name for p in candidate_pairs(limits, quantile=quantile) if p.num_placed < num_sources
    ]
    wanted = names if pairs is None else list(pairs)
    if not wanted or any(name not in names for name in wanted):
        raise InvalidParameterError("pairs", f"names among {', '.join(names)}", pairs)
    return [
        release_neighbours(
            num_targets=num_targets, num_sources=num_sources, bounds=limits, pair=name
        )
        for name in wanted
    ]


@dataclass(frozen=True, kw_only=True)
class _ReleaseAudit(_AuditedClaim):
    """A release audit's checked inputs, the programs of its candidate pairs and its claim.

    Attributes (besides the claim's, `_AuditedClaim`):
        countermeasure: the traffic's.
        release: the release's mechanism.
        candidates: the candidate pairs' neighbouring tables, in the order tried.
        programs: per pair name, the audited programs over its two tables.
        seed: the seed of the traffic's randomness streams.
        scales: the scale of each released aggregate's noise.
        observed: the indices of the observed aggregates among the release's (its `charged`).
    """

    countermeasure: Scramblers | LocalFlooding
    release: Laplace | Gaussian
    candidates: list[ReleaseNeighbours]
    programs: dict[str, tuple[AggregateProgram, AggregateProgram]]
    seed: int
    scales: FloatArray
    observed: tuple[int, ...]

    def report(
        self,
        neighbours: ReleaseNeighbours,
        selections: list[PairSelection],
        events: tuple[EventEstimate, ...],
        num_events: int,
        *,
        seconds: float,
    ) -> ReleaseAuditReport:
        """The audit's report: the claim against the best estimated event's lower bound."""
        best = max(events, key=lambda e: e.epsilon, default=None)
        claim = {f.name: getattr(self, f.name) for f in fields(_AuditedClaim)}
        return ReleaseAuditReport(
            **claim,
            countermeasure=self.countermeasure,
            release=self.release,
            neighbours=neighbours,
            lower_bound=best.epsilon if best is not None else 0.0,
            events_tried=num_events,
            best_event=best if best is not None and best.epsilon > 0 else None,
            events=events,
            pairs=tuple(selections),
            seconds=seconds,
        )


def _checked_audit(
    countermeasure: Countermeasure | None,
    release: ReleaseMechanism | None,
    *,
    num_targets: int,
    bounds: tuple[float, float] | None,
    sql: str,
    runs: int,
    confidence: float,
    delta: float,
    pairs: Sequence[str] | None,
    fault: str,
    aggregate: int | str | None,
    rng: np.random.Generator | int | None,
) -> _ReleaseAudit:
    """`audit_release`'s arguments checked, its pairs' programs built and their claim reported."""
    from dpcomm.plan.privacy import account_plan
    from dpcomm.release.report import release_report

    countermeasure, release = _checked_mechanisms(countermeasure, release, fault)
    count = check_int("runs", runs, minimum=100)
    level = check_probability("confidence", confidence)
    if not 0.0 < level < 1.0:
        raise InvalidParameterError("confidence", "a number in (0, 1)", confidence)
    traffic_delta = check_delta("delta", delta)
    size = check_int("num_targets", num_targets, minimum=2)
    limits = _check_bounds(None, bounds)
    sources = countermeasure.batch_size if isinstance(countermeasure, Scramblers) else 1
    candidates = _candidate_neighbours(
        limits, size, sources, pairs, quantile=_releases_quantile(sql, limits)
    )
    generator = make_rng(rng)
    seed = int(generator.integers(0, 1 << 62))
    programs: dict[str, tuple[AggregateProgram, AggregateProgram]] = {}
    for candidate in candidates:
        d, d_prime = candidate.tables()
        programs[candidate.pair.name] = (
            audited_program(d, release, candidate, size, sql, fault=fault),
            audited_program(d_prime, release, candidate, size, sql, fault=fault),
        )
    first = programs[candidates[0].pair.name][0]
    privacy = account_plan(first.plan, countermeasure, delta=traffic_delta)
    claimed = release_report(first, privacy)
    observed, claim = _observed_claim(first, privacy, claimed, aggregate)
    noises = first.release.noises if first.release is not None else ()
    quantiles = first.release.quantiles if first.release is not None else ()
    # a quantile's feature: its value in candidate steps
    steps = [(q.candidates[-1] - q.candidates[0]) / (len(q.candidates) - 1) for q in quantiles]
    return _ReleaseAudit(
        countermeasure=countermeasure,
        release=release,
        num_targets=size,
        runs=count,
        confidence=level,
        candidates=candidates,
        programs=programs,
        seed=seed,
        scales=np.array([noise.scale for noise in noises] + steps),
        delta=claim.delta,
        traffic_epsilon=privacy.guarantee.epsilon,
        release_epsilon=claim.release_epsilon,
        reported_epsilon=claim.epsilon,
        summed_epsilon=claim.summed_epsilon,
        noise_scales=tuple((a.aggregate, a.scale) for a in claimed.aggregates),
        fault=fault,
        aggregate=None if aggregate is None else claimed.aggregates[observed[0]].aggregate,
        observed=observed,
    )


def _releases_quantile(sql: str, bounds: tuple[float, float]) -> bool:
    """Whether ``sql`` over ``t(k, v)``, ``v`` bounded by ``bounds``, releases a quantile."""
    from dpcomm.queries.sql import bind_sql

    one_row = table_from_arrays("t", {"k": np.array(["k0"], dtype=object), "v": np.zeros(1)})
    return bool(bind_sql(sql, one_row, bounds={"v": bounds}).quantiles)


def _observed_claim(
    program: AggregateProgram,
    privacy: PlanGuarantee,
    claimed: ReleaseReport,
    aggregate: int | str | None,
) -> tuple[tuple[int, ...], ReleaseComposition]:
    """The released aggregates the observer sees, and the claim for that view.

    ``aggregate`` None: every aggregate, and the run's claim (``claimed``: the traffic
    composed with the whole release). Otherwise one aggregate, its index in the report's
    order (``noise_scales``) or the start of exactly one of its descriptions, and the claim
    for a view of the traffic and that aggregate's noisy cells alone: the traffic composed
    with that aggregate's noise alone (`dpcomm.release.compose.compose_release`). That is a
    valid bound for that view: each aggregate's noise is drawn independently, so the traffic
    and that aggregate's cells are distributed as a run of a program releasing that aggregate
    alone, calibrated to the same joint sensitivity (the row's change and one other source's
    tuple delivered in one world only), at its own (ε_i, δ_i); the joint theorem
    (docs/accounting.md, "The joint view: theorem and proof", and "Centred sums") holds for
    any set of released aggregates, that one alone included. A quantile its release does not
    charge (the seeded fault ``quantile-uncharged``) is claimed at the traffic's guarantee
    alone: what the faulty program accounts for it.
    """
    from dpcomm.release.compose import ReleaseComposition, compose_release

    described = [a.aggregate for a in claimed.aggregates]
    if aggregate is None:
        whole = ReleaseComposition(
            release_epsilon=claimed.epsilon,
            release_delta=claimed.delta,
            composed_epsilon=claimed.composed_epsilon,
            summed_epsilon=claimed.summed_epsilon,
            epsilon=claimed.epsilon_total,
            delta=claimed.composed_delta,
        )
        return tuple(range(len(described))), whole
    if isinstance(aggregate, str):
        matches = [i for i, text in enumerate(described) if text.startswith(aggregate)]
    elif isinstance(aggregate, int) and not isinstance(aggregate, bool):
        matches = [aggregate] if 0 <= aggregate < len(described) else []
    else:
        matches = []
    if len(matches) != 1 or program.release is None:
        raise InvalidParameterError(
            "aggregate",
            f"None, an index in 0 … {len(described) - 1}, or the start of one of: "
            + "; ".join(described),
            aggregate,
        )
    index = matches[0]
    charged = program.release.charged
    if index >= len(charged):  # a quantile the release leaves uncharged (quantile-uncharged)
        traffic = privacy.guarantee
        alone = ReleaseComposition(
            release_epsilon=0.0,
            release_delta=0.0,
            composed_epsilon=traffic.epsilon,
            summed_epsilon=traffic.epsilon,
            epsilon=traffic.epsilon,
            delta=traffic.delta,
        )
        return (index,), alone
    return (index,), compose_release(privacy, [charged[index]])


def _route_layout(program: AggregateProgram) -> bytes:
    """Where the program's table puts every source (its first flow's route), as bytes."""
    table = program.table
    if table is None:
        return b""
    return program.route(program.initial_state(), program.flow_names[0], table).tobytes()


def _select_pair(
    audit: _ReleaseAudit,
    randomness: tuple[Randomness, Randomness],
    steps: Iterator[int],
) -> tuple[list[PairSelection], list[tuple[_Reduction, tuple[_View, _View]]]]:
    """Every candidate pair on the selection half: its bound, its fitted reduction and views.

    Pairs whose tables put every source on the same compute nodes share their traffic (the
    same runs of the same streams); every pair shares the release's noise (`_SharedNoise`).
    """
    half = audit.runs // 2
    shared: dict[tuple[int, bytes], tuple[IntArray, BoolArray]] = {}
    noise = _SharedNoise(audit.observed, max(len(n.cells) for n in audit.candidates))
    selections: list[PairSelection] = []
    fitted: list[tuple[_Reduction, tuple[_View, _View]]] = []
    for neighbours in audit.candidates:
        next(steps)
        pair_programs = audit.programs[neighbours.pair.name]
        traffic = []
        for side, program in enumerate(pair_programs):
            layout = _route_layout(program)
            if (side, layout) not in shared:
                shared[side, layout] = _traffic(
                    program, audit.countermeasure, first=0, stop=half, randomness=randomness[side]
                )
            traffic.append(shared[side, layout])
        views = _views(
            neighbours,
            pair_programs,
            (traffic[0], traffic[1]),
            audit.scales,
            audit.observed,
            noise,
        )
        reduction = _Reduction.fit(views, (neighbours.targets[0], neighbours.targets[1]))
        bound = _selection_bound(
            reduction.categorizations(views), confidence=audit.confidence, delta=audit.delta
        )
        selections.append(PairSelection(neighbours.pair.name, bound))
        fitted.append((reduction, views))
    return selections, fitted


def _estimation_views(
    audit: _ReleaseAudit, neighbours: ReleaseNeighbours, randomness: tuple[Randomness, Randomness]
) -> tuple[_View, _View]:
    """The chosen pair's views of the estimation half, runs runs // 2 … runs − 1."""
    pair_programs = audit.programs[neighbours.pair.name]
    first, second = (
        _traffic(
            program, audit.countermeasure, first=audit.runs // 2, stop=audit.runs, randomness=rng
        )
        for program, rng in zip(pair_programs, randomness, strict=True)
    )
    return _views(neighbours, pair_programs, (first, second), audit.scales, audit.observed)


def _search_and_estimate(
    audit: _ReleaseAudit, *, progress: bool
) -> tuple[ReleaseNeighbours, list[PairSelection], tuple[EventEstimate, ...], int]:
    """The pair chosen on the selection half, and its events estimated on the other half.

    Returns the chosen pair, every pair's selection, the chosen pair's estimated events and
    their number (the Bonferroni factor).
    """
    # The two tables' runs draw from two rounds of one seed: independent runs.
    randomness = (Randomness(audit.seed, round=0), Randomness(audit.seed, round=1))
    # The progress bar's steps: each pair's selection half, then the chosen pair's estimation
    # half (a step is counted done when the next one is taken).
    steps = with_progress(
        range(len(audit.candidates) + 1),
        enabled=progress,
        description="release audit",
        unit="pair",
    )
    selections, fitted = _select_pair(audit, randomness, steps)
    chosen = max(range(len(selections)), key=lambda i: (selections[i].selection_bound, -i))
    neighbours = audit.candidates[chosen]
    reduction, selected = fitted[chosen]
    next(steps)
    estimation = _estimation_views(audit, neighbours, randomness)
    joined = (selected[0].join(estimation[0]), selected[1].join(estimation[1]))
    for _ in steps:  # the last step done: the bar ends
        pass
    events, num_events = estimate_events(
        reduction.categorizations(joined), confidence=audit.confidence, delta=audit.delta
    )
    return neighbours, selections, events, num_events


def audit_release(
    countermeasure: Countermeasure | None = None,
    release: ReleaseMechanism | None = None,
    *,
    num_targets: int = DEFAULT_TARGETS,
    bounds: tuple[float, float] | None = None,
    sql: str = RELEASE_AUDIT_SQL,
    runs: int = DEFAULT_RUNS,
    confidence: float = 0.95,
    delta: float = DEFAULT_DELTA,
    pairs: Sequence[str] | None = None,
    fault: str = "none",
    aggregate: int | str | None = None,
    rng: np.random.Generator | int | None = None,
    progress: bool = False,
) -> ReleaseAuditReport:
    """Audit traffic and noisy release together: empirical lower bound vs the reported ε.

    The neighbouring pair and the events are chosen by search on the first half of the runs
    of each table: every candidate pair (`candidate_pairs`) is run, its views reduced under
    every binning (`_Reduction`) and its best event's bound computed there; the pair with the
    largest is run again on the second half, which estimates its selected events
    (Clopper-Pearson, Bonferroni over the events; one pair is estimated, so its choice costs
    nothing).

    Args:
        countermeasure: the traffic's: `Scramblers` (the tables have n rows, one
            batch) or `LocalFlooding` (the tables have one row); default
            `DEFAULT_COUNTERMEASURE`.
        release: `dpcomm.Laplace` or `dpcomm.Gaussian`; default `DEFAULT_RELEASE`.
        num_targets: T >= 2, the compute nodes of the grouping set.
        bounds: [lo, hi]: the SUM's values are clamped to it (default `DEFAULT_BOUNDS`,
            signed).
        sql: the released query over ``t(k, v)``, grouped by ``k`` alone
            (`RELEASE_AUDIT_SQL`: one SUM).
        runs: runs per table (>= 100); half select the pair and events, half estimate them.
        confidence: probability that the lower bound is below the true ε, in (0, 1).
        delta: the traffic's δ (the plan's, as ``run_sql``'s ``delta``); the comparison is
            at the composed δ the report gives.
        pairs: the names of the candidate pairs to try (default: every one of
            `candidate_pairs` that applies; ``quantile-near-tie`` for a query releasing a
            quantile, over scramblers with the sources it places).
        fault: ``"none"`` (the mechanism as the library runs it), or a seeded fault of
            `RELEASE_FAULT_KINDS` (`seeded_release_fault`), which claims the same ε.
        aggregate: None (the default): the observer sees the traffic and every released
            aggregate, against the run's claim. Otherwise one released aggregate, by its index
            in the report's ``noise_scales`` or the start of its description there (e.g.
            ``"SUM(v"``): the observer sees the traffic and that aggregate's noisy cells
            alone, against the claim for that view, the traffic composed with that
            aggregate's noise alone (valid by the joint theorem for a release of that
            aggregate alone: `_observed_claim`). A fault confined to one aggregate widens
            its loss against its own share of ε2, not against the whole release's.
        rng: a numpy Generator, a seed, or None: the seed of the traffic's randomness streams
            (the release's noise is OpenDP's, never seeded).
        progress: show a progress bar over the pairs (each pair's selection half, then the
            chosen pair's estimation half).
    """
    start = time.perf_counter()
    audit = _checked_audit(
        countermeasure,
        release,
        num_targets=num_targets,
        bounds=bounds,
        sql=sql,
        runs=runs,
        confidence=confidence,
        delta=delta,
        pairs=pairs,
        fault=fault,
        aggregate=aggregate,
        rng=rng,
    )
    found = _search_and_estimate(audit, progress=progress)
    return audit.report(*found, seconds=time.perf_counter() - start)


__all__ = [
    "DEFAULT_BOUNDS",
    "DEFAULT_COUNTERMEASURE",
    "DEFAULT_DELTA",
    "DEFAULT_RELEASE",
    "DEFAULT_RUNS",
    "DEFAULT_TARGETS",
    "PAIR_NAMES",
    "RELEASE_AUDIT_SQL",
    "RELEASE_FAULT_KINDS",
    "TIE_VALUES",
    "NeighbourPair",
    "PairSelection",
    "ReleaseAuditReport",
    "ReleaseNeighbours",
    "ReleaseRuns",
    "audit_release",
    "audited_program",
    "candidate_pairs",
    "contributions",
    "near_tie",
    "noisy_values",
    "release_neighbours",
    "release_runs",
    "seeded_release_fault",
    "traffic_runs",
]
