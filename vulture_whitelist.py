# ruff: noqa
"""Names in src/ that vulture finds no caller for, and that stay: why, one group at a time.

`make check` runs ``vulture src vulture_whitelist.py --min-confidence 60`` (functions registered
by ``@register``, ``@base.register`` and ``@app.callback`` are ignored there: the figures'
registry and Dash call them). A name here counts as used; add one only with its reason.
Vulture matches names, not objects: ``_.name`` stands for an attribute of any object.
"""

_ = object

# Public API: exported or documented, for users and the examples (nothing in src calls it).
_.raw_rows  # pipeline/runs.py: AggregateRun.raw_rows, the raw noisy values of a release
mnist5k  # dpcomm.datasets
fashion_mnist  # dpcomm.datasets
_.from_matrix  # dpcomm.accounting.GenericLocalRandomizer: a T x T randomizer from its matrix
_.transition_matrix  # dpcomm.accounting.LocalRandomizer: R_σ's matrix
_.num_features  # dpcomm.data.ImageDataset
_.num_classes  # dpcomm.data.ImageDataset
_.current_round  # dpcomm.engine.network.ReplayCache
_.oldest_round  # dpcomm.engine.network.ReplayCache
UniformCodec  # dpcomm.queries.codec: a custom program's codec (examples/custom_plan.py)
run_kmeans  # dpcomm.pipeline.runs: K-means on an engine (docs/deployment.md, benchmarks)

# References the tests check the library against, and maintenance tools.
exact_pure_epsilon  # accounting/brute_force.py: ε by enumeration (tests/reference)
reference_result  # queries/groupby.py: the query by DuckDB, to compare the engines with
assign_compute_nodes  # queries/groupby.py: each row's compute node, to compare routes with
_.nonprivate_result  # queries/aggregate.py: the result over every tuple
write_diabetes_csv  # data/diabetes.py: writes the shipped diabetes.csv (a test checks it)
_.cache_clear  # accounting/pld.py: the row cache's reset, as functools' (tests, benchmarks)
forget_bound_queries  # queries/sql.py: for tests that patch the binding's code

# Fields of records and reports: data their readers (JSON, the wire, users) get.
collect_seconds  # engine/network/records.py
forward_seconds  # engine/network/records.py
outputs_sent  # engine/network/records.py
result_received  # engine/network/records.py
frames_received  # engine/network/report.py
dropped_total  # engine/network/report.py
bytes_nonprivate  # pipeline/report.py
opendp_delta  # release/report.py
changed_keys  # release/report.py
num_values  # experiments/attacker.py
iterations_done  # queries/kmeans.py
CENTROIDS  # engine/network/frames.py: a frame kind of the wire format
deployment  # pipeline/job.py: Guarantee.deployment (set by pipeline/charge.py, read by none)

# Attributes set for a library that reads them.
_.writeable  # numpy's array flags (data/images.py)
_.max_size  # asyncio's SSLProtocol read buffer (engine/network/tls.py)
_.num_tickets  # ssl.SSLContext (engine/network/tls.py)
_.prec  # decimal.Context (queries/groupby.py)
_.Emax  # decimal.Context (queries/groupby.py)
_.Emin  # decimal.Context (queries/groupby.py)

# No caller, in a module others are changing: to delete there.
_.flow_traffic  # engine/run.py: Run.flow_traffic
