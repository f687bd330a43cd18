"""The options ``run`` takes (and ``deploy configs``, ``plan`` and ``audit`` some of them).

Building them imports nothing of the library beyond `dpcomm.cli.defaults`: the parser is
built before any command runs, for every command.
"""

from __future__ import annotations

import argparse
from typing import Any

from dpcomm.cli.defaults import (
    DEFAULT_DELTA,
    DEFAULT_NUM_TARGETS,
    DEFAULT_TEXT_BYTES,
    INIT_METHODS,
    MAX_COUNT,
    MAX_ROUND_SECONDS,
)
from dpcomm.cli.output import (
    add_progress_options,
    bounded_int,
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
)

#: Defaults of the countermeasure options, per use case (the paper's settings, Section 5),
#: shared by ``run`` and ``deploy``.
AGGREGATE_DEFAULTS = {"sampling": 0.2, "batch": 100, "dummies": 50}


KMEANS_DEFAULTS = {"sampling": 0.9, "batch": 100, "dummies": 50}


#: Most rows of a synthetic table (its rows are drawn where they are read, by ranges).
MAX_ROWS = 10**12


#: K-means' defaults: K centroids, I iterations, on the embedded digits.
KMEANS_CENTROIDS = 10


KMEANS_ITERATIONS = 10


KMEANS_DATASET = "mnist5k"


def add_countermeasure_options(parser: argparse.ArgumentParser, defaults: dict[str, float]) -> None:
    """The countermeasure options, named as in ``dpcomm account``."""

    def default(name: str, kind: type = float) -> str:
        return f"default {kind(defaults[name])}"

    group = parser.add_argument_group("countermeasure (every data-dependent cluster)")
    group.add_argument(
        "--mechanism",
        choices=["none", "local", "scrambler"],
        default="scrambler",
        help="none; local sampling + flooding (Section 3); scramblers (Section 4). "
        "Default: scrambler",
    )
    group.add_argument(
        "--sampling",
        dest="sampling_rate",
        metavar="SAMPLING",
        type=float,
        help=f"σ, sampling rate in [0, 1] ({default('sampling')}; 0 for none)",
    )
    group.add_argument(
        "--batch",
        dest="batch_size",
        metavar="BATCH",
        type=int,
        help=f"n, sources per scrambler (scrambler only; {default('batch', int)})",
    )
    group.add_argument(
        "--dummies",
        dest="num_dummies",
        metavar="DUMMIES",
        type=int,
        help=f"d, dummies per scrambler ({default('dummies', int)}) or flooding dummies per "
        "source (local; default 0)",
    )
    group.add_argument(
        "--capped", action="store_true", help="capped scramblers S̄_d (at most n per target)"
    )
    group.add_argument(
        "--delta",
        type=float,
        default=DEFAULT_DELTA,
        help=(
            f"δ of the whole plan (default {DEFAULT_DELTA:g}): the clusters on a data path "
            "compose by PLD at this δ, or by Theorem 2 with δ split among them, whichever "
            "gives the smaller ε"
        ),
    )
    group.add_argument(
        "--target-epsilon",
        type=non_negative_float,
        metavar="E",
        help="refuse, before running, a plan whose ε exceeds E (e.g. the table's size changed "
        "the batches; with --release, the ε of traffic and release together)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="seed of every draw, for a reproducible run (default: fresh operating-system "
        "entropy; a seeded run is not private against whoever knows the seed)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print one JSON document (null is SQL NULL; NaN and ±∞ are "NaN", "inf", '
        '"-inf"; DECIMAL values are exact strings)',
    )
    add_progress_options(parser)


def add_aggregate_options(parser: argparse.ArgumentParser, *, running: bool = True) -> None:
    """The query and its data: ``--sql``, ``--data|--synthetic|--diabetes``, ``--targets``, ...

    ``running``: also ``--rows`` and ``--estimate`` (what a run prints).
    """
    parser.add_argument(
        "--sql",
        required=True,
        help="SELECT ... FROM t GROUP BY ...",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--data",
        help="a CSV or Parquet file; the FROM table is bound to it",
    )
    source.add_argument(
        "--synthetic", type=bounded_int(1, MAX_ROWS), metavar="ROWS",
        help="synthetic table of ROWS (g1..g4 grouping codes, m1, m2 measures)",
    )  # fmt: skip
    source.add_argument(
        "--diabetes",
        action="store_true",
        help="the embedded diabetes table of the paper's running example (10,000 rows, columns "
        "A, B, I; the default)",
    )
    parser.add_argument(
        "--distribution",
        choices=["uniform", "zipf"],
        default="uniform",
        help="distribution of the synthetic grouping columns g1..g4",
    )
    parser.add_argument(
        "--targets",
        dest="num_targets",
        metavar="TARGETS",
        type=bounded_int(None, MAX_COUNT),
        default=DEFAULT_NUM_TARGETS,
        help=f"T, targets (compute nodes) per grouping set (default {DEFAULT_NUM_TARGETS})",
    )
    add_public_bounds_options(parser)
    if running:
        parser.add_argument(
            "--rows", type=non_negative_int, default=20, help="result rows to print (default 20)"
        )
        parser.add_argument(
            "--estimate",
            choices=["delivered", "unbiased"],
            default="delivered",
            help="delivered: the values over the tuples that arrived (default); unbiased: "
            "estimates over every tuple, COUNT and SUM divided by the known probability "
            "P = 1 − σ + σ/T that a tuple arrives, AVG their ratio, each with its standard "
            "error and 95%% interval (columns NAME (estimate), NAME (se), NAME (95%% low), "
            "NAME (95%% high)); groups that received no tuple are estimated as 0; MIN, MAX "
            "of the delivered tuples; with --release, from the released values, the "
            "intervals covering the noise too",
        )
        add_release_options(parser)


#: ε of a release without ``--release-epsilon``, δ of a Gaussian one without ``--release-delta``.
DEFAULT_RELEASE_EPSILON = 1.0


DEFAULT_RELEASE_DELTA = 1e-6


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """The noisy release's options (what `release_options` reads).

    ``--release``, ``--release-epsilon``, ``--release-delta``, ``--consistent-totals``,
    ``--bounds``, ``--keys`` and ``--key-selection-delta``.
    """
    add_release_noise_options(
        parser,
        release_help="release the result with noise drawn by OpenDP at the result node "
        "(central DP on top of the traffic's): COUNT, SUM and AVG only; needs --keys for every "
        "grouping column (or --key-selection-delta) and --bounds for every column a SUM "
        "or AVG reads",
        split_help="split among its aggregates to minimise the published values' expected error",
    )
    parser.add_argument(
        "--consistent-totals",
        action="store_true",
        default=None,
        help="with --release: publish totals consistent across grouping sets (a ROLLUP or "
        "CUBE parent is the sum of its children: least squares over the released cells; "
        "no privacy cost)",
    )
    add_release_scope_options(
        parser,
        keys_help="with --release: the public values of grouping column COL; every one is "
        "released, absent ones too, and no other (repeatable)",
        selection_help="with --release: select the keys of grouping sets whose columns have no "
        "--keys by OpenDP's threshold on their noisy count, at δ = D (added to the "
        "release's δ; e.g. 1e-6)",
    )


def add_release_noise_options(
    parser: argparse.ArgumentParser, *, release_help: str, split_help: str
) -> None:
    """The release's noise: ``--release`` (Laplace or Gaussian), its ε and its δ.

    ``dpcomm run aggregate`` and ``dpcomm run kmeans`` take them; ``release_help`` says what
    the command releases, ``split_help`` how it splits ε among what it releases.
    """
    parser.add_argument(
        "--release", choices=["laplace", "gaussian"], default=None, help=release_help
    )
    parser.add_argument(
        "--release-epsilon",
        type=float,
        default=None,
        metavar="E",
        help=f"with --release: ε of the release, {split_help} "
        f"(default {DEFAULT_RELEASE_EPSILON:g})",
    )
    parser.add_argument(
        "--release-delta",
        type=float,
        default=None,
        metavar="D",
        help=f"with --release gaussian: δ of the release (default {DEFAULT_RELEASE_DELTA:g})",
    )


def add_release_scope_options(
    parser: argparse.ArgumentParser, *, keys_help: str, selection_help: str
) -> None:
    """What a release covers: ``--bounds``, ``--keys``, ``--key-selection-delta``.

    ``dpcomm run aggregate`` and ``dpcomm plan`` take them, read by
    `dpcomm.cli.execute.parse_bounds` and `dpcomm.cli.execute.parse_keys`; their help texts say
    what each command does with the keys.
    """
    parser.add_argument(
        "--bounds",
        action="append",
        default=[],
        metavar="COL=LO:HI",
        help="with --release: clamp COL to [LO, HI] on each source's row (repeatable)",
    )
    parser.add_argument(
        "--keys", action="append", default=[], metavar="COL=V1,V2,...", help=keys_help
    )
    parser.add_argument(
        "--key-selection-delta", type=float, default=None, metavar="D", help=selection_help
    )


def add_data_seed_option(parser: Any, *, aggregate: bool, kmeans: bool) -> None:
    """``--data-seed``: of the synthetic table, of K-means' initial centroids, or of both."""
    what = " and ".join(
        text
        for text, wanted in (
            ("the --synthetic table", aggregate),
            ("the choice of the initial centroids (K-means, --init)", kmeans),
        )
        if wanted
    )
    parser.add_argument(
        "--data-seed",
        dest="start_seed",
        metavar="DATA_SEED",
        type=non_negative_int,
        default=0,
        help=f"seed of {what} (default 0)",
    )


def add_kmeans_options(parser: Any) -> None:
    """The K-means program and its points: ``--dataset`` or ``--data``, ``--k``, ``--init``, ...

    ``--drop-non-finite`` too: what [`dpcomm.kmeans`][] refuses unless asked to drop it.
    """
    parser.add_argument(
        "--dataset",
        help=f"{KMEANS_DATASET} (embedded, 4,000 training and 1,000 test digits; the default), "
        "fashion-mnist (make data), or a directory of MNIST-format IDX files",
    )
    parser.add_argument(
        "--data",
        metavar="FILE.csv|FILE.parquet",
        help="cluster the rows of this table instead of a dataset (one source per row), on "
        "its --columns",
    )
    parser.add_argument(
        "--columns",
        metavar="C1,C2,...",
        help="with --data: the numeric columns (integer, decimal, floating-point) that are "
        "the points' coordinates",
    )
    parser.add_argument(
        "--label-column",
        metavar="L",
        help="with --data: a column of labels (any type, no NULL) to score the clusters "
        "against (Rand index, adjusted Rand index, NMI); never sent anywhere",
    )
    parser.add_argument(
        "--k",
        type=bounded_int(None, MAX_COUNT),
        default=KMEANS_CENTROIDS,
        help=f"K, number of centroids and of compute nodes per iteration, at most one per "
        f"source (default {KMEANS_CENTROIDS})",
    )
    parser.add_argument(
        "--iterations",
        type=bounded_int(None, MAX_COUNT),
        default=KMEANS_ITERATIONS,
        help=f"I, number of iterations (default {KMEANS_ITERATIONS})",
    )
    parser.add_argument(
        "--init",
        choices=INIT_METHODS,
        default="k-means++",
        help="how --data-seed chooses the K initial centroids: k-means++ (D² seeding, which "
        "reads every point; the default) or random (K distinct points); chosen among the "
        "sources' points they are sent to every node as they are (the report's privacy notes "
        "say so), unless chosen among --init-data",
    )
    parser.add_argument(
        "--init-data",
        metavar="FILE.csv|FILE.parquet",
        help="with --data: public points (the same --columns) to choose the initial centroids "
        "among, so that they reveal nothing about the sources",
    )
    parser.add_argument(
        "--sources",
        type=int,
        help="sources: the first N training points or rows (default: all of them)",
    )
    parser.add_argument(
        "--drop-non-finite",
        action="store_true",
        help="drop the points holding NULL, NaN, ±inf or a value beyond float32's range (a "
        "float IDX file, a table's cells), saying how many, instead of refusing the data",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="map each column from its public --bounds onto [0, 1] before clustering (so that "
        "no column weighs more for its units) and the centroids back; with --release, the "
        "noise is calibrated on the scaled bounds",
    )
    add_kmeans_release_options(parser)


def add_kmeans_release_options(parser: argparse.ArgumentParser) -> None:
    """K-means's noisy release: ``--release``, its ε and δ, and ``--bounds``."""
    add_release_noise_options(
        parser,
        release_help="publish every iteration's centroids from noisy per-cluster sums "
        "(clamped to --bounds, centred on their midpoints) and noisy counts, drawn by OpenDP "
        "at each compute node; the next iteration routes by these noisy centroids; needs "
        "--bounds",
        split_help="over every iteration, split among the iterations' sums and counts to "
        "minimise the centroids' expected error",
    )
    parser.add_argument(
        "--bounds",
        action="append",
        default=[],
        metavar="COL=LO:HI|LO:HI",
        help="with --release or --scale: public bounds of a --columns column (repeat for "
        "each), or LO:HI once for every column (a dataset's pixels: 0:255)",
    )


def add_public_bounds_options(parser: argparse.ArgumentParser) -> None:
    """``--max-groups`` and ``--max-text-bytes``: public sizes that the data must fit."""
    parser.add_argument(
        "--max-groups",
        type=int,
        metavar="G",
        help="public bound on the groups one compute node outputs; every output is padded to "
        "it so that its size does not depend on the data (default: the number of sources, "
        "which nothing exceeds; a smaller bound makes outputs smaller and fails the run, "
        "in every engine, if a compute node has more groups)",
    )
    parser.add_argument(
        "--max-text-bytes",
        type=int,
        default=DEFAULT_TEXT_BYTES,
        metavar="B",
        help="public bound on the UTF-8 bytes of a text value the query reads; every payload "
        "is as wide as if each text value had B bytes, so that the frame size does not depend "
        f"on the data (default {DEFAULT_TEXT_BYTES}; a longer value is refused)",
    )


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--out`` and ``--report``."""
    group = parser.add_argument_group("output files")
    group.add_argument(
        "--out",
        metavar="FILE.csv|FILE.parquet",
        help="write the result (Aggregate: the result rows with DuckDB's column names; "
        "K-means: the centroids, and each source's centroid to FILE-assignments.csv|.parquet)",
    )
    group.add_argument(
        "--report", metavar="FILE.json", help="write the run's report (as --json prints it)"
    )


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The engine options: ``--engine``, Dask's (``--scheduler``, ...) and the network's."""
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--engine",
        choices=["memory", "dask", "network"],
        default="memory",
        help="memory: the vectorized simulator (default); dask: the roles of every partition "
        "of sources as Dask tasks on a distributed cluster (Parquet --data and --synthetic "
        "rows are read by the workers); network: a real deployment on this machine, the "
        "coordinator, result, compute nodes, scramblers and sources as separate processes on "
        "127.0.0.1, each node with its own certificate (mutual TLS 1.3), also printing what "
        "was measured on the wire; the same run with the same --seed. A deployment starts a "
        "process per 600 sources and a TLS handshake per source and grouping set (about 17 ms "
        "of CPU per source on a small machine), so the defaults are slow there: the embedded "
        "10,000-row table takes minutes, K-means on all 4,000 digits over 10 iterations "
        "longer; for a quick round pass a smaller table (--synthetic 1000) or, for K-means, "
        "--sources 500 --k 4 --iterations 2. With --ledger FILE a deployed round is charged "
        "before it starts, at the weakest guarantee it can report (every scrambler at any "
        "batch size late sources could leave it)",
    )
    group.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="with --engine dask: the address of a running Dask scheduler, started with "
        "`dask scheduler` (default: $DASK_SCHEDULER_ADDRESS, else a LocalCluster started for "
        "the run and closed after)",
    )
    group.add_argument(
        "--connect-timeout",
        type=float,
        metavar="SECONDS",
        help="with --engine dask: how long to wait for the scheduler to answer before the run "
        "fails in one line (default 10)",
    )
    group.add_argument(
        "--partitions",
        type=bounded_int(1, MAX_COUNT),
        help="with --engine dask: partitions of the sources, each of whole scramblers "
        "(default: one per 500,000 sources, at least one per worker); the run does not "
        "depend on it",
    )
    group.add_argument(
        "--workers",
        type=bounded_int(1, 256),
        help="with --engine dask and no --scheduler: workers of the LocalCluster (default: "
        "one per core)",
    )
    add_network_options(group)


def add_network_options(group: Any) -> None:
    """``--engine network``'s options: the round's deadlines, its certificates, a fault."""
    add_round_options(group, max_left_out=None, only="with --engine network: ")
    group.add_argument(
        "--workdir", help="with --engine network: keep certificates here (default: temporary)"
    )
    group.add_argument(
        "--force",
        action="store_true",
        help="with --engine network: replace the certificates and keys an existing --workdir holds",
    )
    group.add_argument(
        "--kill-scrambler",
        type=int,
        metavar="K",
        help="with --engine network, fault injection: scrambler K (global index) dies mid-forward",
    )


def round_seconds(text: str) -> float:
    """An argparse type: a number of seconds in (0, one day], a round's longest deadline.

    The bound is the network engine's (``MAX_ROUND_SECONDS``): ``deploy configs`` writes it
    into every node's config, where a deadline of 10^23 seconds would never end a round.
    """
    value = positive_float(text)
    if value > MAX_ROUND_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds in (0, {MAX_ROUND_SECONDS:,.0f}] (one day), got {text!r}"
        )
    return value


def add_round_options(parser: Any, *, max_left_out: float | None = 0.0, only: str = "") -> None:
    """The deadlines of a round and what it tolerates.

    ``max_left_out``: its default; ``only``: the condition their help texts start with.
    """
    parser.add_argument(
        "--idle-seconds",
        type=round_seconds,
        help=only + "T: a phase of the round ends after T seconds without progress: registration "
        "when no node registered for T (an absent source is left out), a scrambler's window "
        "when no message came for T (it closes at once when all its sources are in), a link "
        "when its peer stayed unreachable for T (default 30; 120 for deploy configs, whose "
        "hosts are started by hand)",
    )
    parser.add_argument(
        "--max-left-out",
        type=fraction,
        default=max_left_out,
        metavar="FRACTION",
        help=only + "fraction of the sources that may be left out (absent at registration, late, "
        "unreachable, or behind a dead scrambler) before the round counts as failed, exit "
        "status 1 (default 0); with deploy configs the coordinator's node checks the sources "
        "that never registered",
    )
    parser.add_argument(
        "--timeout",
        type=round_seconds,
        help=only
        + "cap on the whole round in seconds, at most one day (default: 600 s + 0.1 s per "
        "source and stage; a round that makes progress is never cut by T)",
    )
