"""The planner's costs (issue #4): the one cost model's, and what the simulator sends.

``test_planner_costs_are_the_cost_model_and_the_simulator`` checks the planner's costs against
:func:`dpcomm.plan.transform` of the program's own plan and against ``dpcomm.engine.simulate``.
"""

from contextlib import nullcontext

import pytest

from dpcomm.calibration import (
    describe_batches,
    nonprivate_load,
    plan_costs,
    plan_countermeasures,
    recruited_sources,
)
from dpcomm.calibration.costs import scrambler_counts
from dpcomm.engine import simulate
from dpcomm.errors import BalancedBatchesWarning
from dpcomm.plan import (
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
    balanced_batch_sizes,
    batch_size_counts,
)
from dpcomm.plan.builders import kmeans_plan

# Not from dpcomm.plan: once the submodule dpcomm.plan.transform is imported, the package's
# attribute ``transform`` is that module, not the function.
from dpcomm.plan.transform import transform


def test_scrambler_counts_are_every_realized_number_of_scramblers():
    for sources in (12_346, 2_000, 137, 10, 1, 2):
        counts = scrambler_counts(sources)
        realized = sorted({len(balanced_batch_sizes(sources, n)) for n in range(1, sources + 1)})
        assert counts == realized
        for count in counts:  # n = ⌈S_t/K⌉ names the batches of K scramblers
            batches = balanced_batch_sizes(sources, -(-sources // count))
            assert len(batches) == count and sum(batches) == sources
            assert max(batches) - min(batches) <= 1
    # A restriction list keeps the K of the given n only.
    assert scrambler_counts(12_346, (1000, 100, 99_999)) == [13, 124]
    assert batch_size_counts(12_346, 1000) == {950: 9, 949: 4}


def test_describe_batches():
    assert describe_batches(balanced_batch_sizes(12_346, 100)) == (
        "124 scramblers: 70 of 100 sources, 54 of 99"
    )
    assert describe_batches((100,) * 10) == "10 scramblers of 100 sources"
    assert describe_batches((7,)) == "1 scrambler of 7 sources"
    assert describe_batches(()) == "no scrambler"


# --- costs: the planner's are the cost model's, and the simulator sends them ---------------


SIMULATED = [
    # (workload, clusters, T, S_t, countermeasure, channel bound reached)
    ("aggregate", 1, 5, 600, Scramblers(sampling_rate=0.3, batch_size=50, num_dummies=20), True),
    ("aggregate", 2, 4, 530, Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=9), True),
    ("aggregate", 3, 6, 300, Scramblers(sampling_rate=0.0, batch_size=300, num_dummies=40), True),
    ("aggregate", 1, 5, 137, Scramblers(sampling_rate=0.4, batch_size=10, num_dummies=30), True),
    ("aggregate", 2, 5, 400, LocalFlooding(sampling_rate=0.4, num_dummies=4), True),
    ("aggregate", 2, 6, 400, LocalFlooding(sampling_rate=0.4, num_dummies=1), False),
    ("kmeans", 1, 4, 500, Scramblers(sampling_rate=0.5, batch_size=60, num_dummies=10), True),
    ("kmeans", 3, 4, 450, Scramblers(sampling_rate=0.9, batch_size=100, num_dummies=3), True),
    ("kmeans", 3, 5, 300, LocalFlooding(sampling_rate=0.5, num_dummies=2), True),
    ("kmeans", 1, 5, 300, LocalFlooding(sampling_rate=0.5, num_dummies=4), True),
]  # fmt: skip


@pytest.mark.parametrize(("workload", "clusters", "targets", "sources", "countermeasure", "tight"),
                         SIMULATED)  # fmt: skip
def test_planner_costs_are_the_cost_model_and_the_simulator(
    workload, clusters, targets, sources, countermeasure, tight, aggregate_program, kmeans_program
):
    if workload == "aggregate":
        program = aggregate_program(sources, clusters, targets)
    else:
        program = kmeans_program(sources, targets, clusters)
    common = {
        "num_sources": sources,
        "num_targets": targets,
        "workload": workload,
        "num_clusters": clusters,
    }
    costs = plan_costs(countermeasure, **common)
    # The planner's costs are those of the cost model on the program's own plan.
    transformed = transform(program.plan, countermeasure)
    assert costs.messages == transformed.messages
    assert dict(costs.channels_by_role) == transformed.channels_by_role()
    assert costs.max_channels == transformed.max_channels()
    assert costs.num_scramblers == transformed.num_scramblers()
    batches = set(transformed.batches.values())
    if isinstance(countermeasure, Scramblers):
        assert batches == {costs.batch_sizes}
        assert costs.batch_sizes == balanced_batch_sizes(sources, countermeasure.batch_size)
    else:
        assert batches == set() and costs.batch_sizes is None
    # The simulator sends exactly the messages of every routed flow (and says when a
    # balanced batch is smaller than the n asked for: here that changes ε).
    smaller = isinstance(countermeasure, Scramblers) and (
        min(costs.batch_sizes) < countermeasure.batch_size
    )
    with pytest.warns(BalancedBatchesWarning) if smaller else nullcontext():
        run = simulate(program, countermeasure, delta=1e-4, seed=3)
    measured = {flow.flow: flow.messages for flow in run.traffic}
    assert measured == {f.name: f.messages for f in transformed.flows}
    assert run.efficiency.messages == transformed.messages == costs.messages
    # Channels: the bound holds for every role, and is reached when the flows are dense.
    simulated = run.efficiency.max_channels_by_role
    for role, value in simulated.items():
        assert value <= costs.channels_by_role[role], role
    assert run.efficiency.max_channels <= costs.max_channels
    if tight:
        assert simulated == dict(costs.channels_by_role)
        assert run.efficiency.max_channels == costs.max_channels
    else:
        assert simulated != dict(costs.channels_by_role)
    baseline = simulate(program, NoCountermeasure(), delta=1e-4, seed=3)
    assert baseline.efficiency.messages == nonprivate_load(**common)


def test_the_planned_configuration_is_costed_by_the_cost_model():
    result = plan_countermeasures(
        num_sources=1500, num_targets=8, iterations=2, epsilon=2.0, delta=1e-4,
        sampling_rates=(0.0, 0.3, 0.6), max_channels=200,
    )  # fmt: skip
    for candidate in (result, *result.pareto):
        configuration = candidate.configuration
        plan = kmeans_plan(num_sources=candidate.num_sources, num_centroids=8, num_iterations=2)
        transformed = transform(plan, configuration.countermeasure)
        assert candidate.network_load_messages == transformed.messages
        assert candidate.max_channels_per_node == transformed.max_channels()
        if configuration.mechanism == "scrambler":
            sizes = transformed.batches["iteration 1"]
            assert configuration.batch_sizes == sizes == transformed.batches["iteration 2"]
            assert configuration.num_scramblers == transformed.num_scramblers("iteration 1")
            assert max(sizes) <= configuration.batch_size
        else:
            assert configuration.batch_sizes is None and configuration.num_scramblers is None
    assert (
        dict(result.channels_by_role)
        == transform(
            kmeans_plan(num_sources=result.num_sources, num_centroids=8, num_iterations=2),
            result.configuration.countermeasure,
        ).channels_by_role()
    )
    assert result.max_channels_per_node <= 200
    assert (
        result.nonprivate_load_messages
        == transform(
            kmeans_plan(num_sources=1500, num_centroids=8, num_iterations=2), NoCountermeasure()
        ).messages
    )


def test_recruited_sources_match_the_engine_consents(aggregate_program):
    program = aggregate_program(1000, 1, 20)
    countermeasure = LocalFlooding(sampling_rate=0.2, num_dummies=0)
    run = simulate(program, countermeasure, delta=1e-4, seed=0)
    needed = recruited_sources(num_sources=1000, num_targets=20, sampling_rate=0.2)
    assert needed - 1000 == run.extra_consents()
    assert needed == transform(program.plan, countermeasure).sources_needed()
    assert recruited_sources(num_sources=10_000, num_targets=20, sampling_rate=0.2) == 12_346
    assert (
        recruited_sources(
            num_sources=10_000, num_targets=20, sampling_rate=0.2, max_extra_consents=100
        )
        == 10_100
    )
