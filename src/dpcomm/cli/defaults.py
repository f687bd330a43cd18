"""The library's defaults and limits that the parser shows in its help texts and checks.

Written here, not imported, so that building the parser imports none of the library's heavy
modules (numpy, scipy, DuckDB): the library's modules that hold them import those at their top.
``tests/unit/cli/test_defaults.py`` checks that each equals the library's value. The
accountant's names and limits are imported: `dpcomm.accounting.defaults` imports nothing.
"""

from __future__ import annotations

from dpcomm.accounting.defaults import (
    DEFAULT_MONTE_CARLO_SAMPLES as DEFAULT_MONTE_CARLO_SAMPLES,
    MAX_ROUNDS as MAX_ROUNDS,
    METHOD_NAMES as METHOD_NAMES,
)
from dpcomm.experiments.fault_kinds import RELEASE_FAULT_KINDS as RELEASE_FAULT_KINDS

#: `dpcomm.api.DEFAULT_DELTA`: δ of a whole plan.
DEFAULT_DELTA = 1e-4
#: `dpcomm.queries.aggregate.DEFAULT_NUM_TARGETS`: T per grouping set.
DEFAULT_NUM_TARGETS = 20
#: `dpcomm.queries.aggregate.DEFAULT_TEXT_BYTES`: public bound on a text value's bytes.
DEFAULT_TEXT_BYTES = 255
#: `dpcomm.queries.kmeans.INIT_METHODS`: how K-means chooses its initial centroids.
INIT_METHODS = ("random", "k-means++")
#: `dpcomm.validation.MAX_COUNT` and `dpcomm.validation.MAX_SOURCES`.
MAX_COUNT = 1_000_000
MAX_SOURCES = 1_000_000_000_000

#: `dpcomm.experiments.audit.FAULT_KINDS` (the release audit's are imported: no numpy there).
FAULT_KINDS: tuple[str, ...] = (
    "nonuniform-dummies",
    "no-shuffle",
    "lower-sampling",
    "fewer-dummies",
)

#: `dpcomm.experiments.release_audit`'s default configuration: its query, T, the scrambler
#: (σ, n, d), the release (Laplace ε2), the traffic's δ, the clamping bounds and the runs.
RELEASE_AUDIT_SQL = "SELECT k, SUM(v) AS s FROM t GROUP BY k"
RELEASE_AUDIT_TARGETS = 2
RELEASE_AUDIT_SAMPLING = 0.04
RELEASE_AUDIT_BATCH = 2000
RELEASE_AUDIT_DUMMIES = 0
RELEASE_AUDIT_MECHANISM = "laplace"
RELEASE_AUDIT_EPSILON = 3.0
RELEASE_AUDIT_DELTA = 1e-2
RELEASE_AUDIT_BOUNDS = (-10.0, 10.0)
RELEASE_AUDIT_RUNS = 40_000
#: `dpcomm.experiments.release_audit.PAIR_NAMES`: the release audit's candidate pairs.
RELEASE_PAIR_NAMES: tuple[str, ...] = (
    "third-key",
    "signed",
    "others-on-destination",
    "others-on-source",
    "quantile-near-tie",
)
#: `dpcomm.experiments.kmeans_audit`'s faults and default configuration: K = T, the scrambler
#: (σ, n, d), the release's ε2 (Laplace), the traffic's δ, the bounds and the runs.
KMEANS_FAULT_KINDS: tuple[str, ...] = ("own-row", "unclamped")
KMEANS_AUDIT_TARGETS = 2
KMEANS_AUDIT_SAMPLING = 0.04
KMEANS_AUDIT_BATCH = 2000
KMEANS_AUDIT_DUMMIES = 0
KMEANS_AUDIT_EPSILON = 8.0
KMEANS_AUDIT_DELTA = 1e-2
KMEANS_AUDIT_BOUNDS = (0.0, 20.0)
KMEANS_AUDIT_RUNS = 20_000
#: `dpcomm.engine.network.deploy.MAX_ROUND_SECONDS`: the longest round, one day.
MAX_ROUND_SECONDS = 86_400.0
