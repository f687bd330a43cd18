"""Who talks to whom: the routes of every kind of routed flow, whole and per partition."""

import itertools

import numpy as np
import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.builders import aggregate_plan, kmeans_plan
from dpcomm.plan.costs import ConsecutiveBatches, balanced_batch_sizes
from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.routes import STATIC_KINDS, Ownership, Routes
from dpcomm.plan.transform import scrambler_group_name, transform

SCRAMBLERS = Scramblers(sampling_rate=0.2, batch_size=3, num_dummies=2)


def edge_set(edges):
    return sorted(
        zip(edges.senders.tolist(), edges.receivers.tolist(), edges.counts.tolist(), strict=True)
    )


def kmeans_routes(countermeasure, *, sources=10, centroids=3, iterations=2):
    plan = kmeans_plan(num_sources=sources, num_centroids=centroids, num_iterations=iterations)
    return Routes(transform(plan, countermeasure))


def aggregate_routes(countermeasure, *, sources=10, compute=(4, 1)):
    plan = aggregate_plan(
        num_sources=sources, flows=[f"f{i}" for i in range(len(compute))], num_targets=compute
    )
    return Routes(transform(plan, countermeasure))


@pytest.mark.parametrize(("sources", "batches"), [(10, 4), (12, 4), (7, 7), (1, 1), (100, 3)])
def test_consecutive_batches_are_balanced_and_cover_every_source(sources, batches):
    cut = ConsecutiveBatches(sources, batches)
    assert sum(cut.sizes) == sources and max(cut.sizes) - min(cut.sizes) <= 1
    assert list(cut.sizes) == sorted(cut.sizes, reverse=True)
    assert cut.offsets.tolist() == [cut.first(k) for k in range(batches + 1)]
    owner = cut.batch_of(np.arange(sources))
    for k in range(batches):
        assert list(cut.members(k)) == np.flatnonzero(owner == k).tolist()


def test_consecutive_batches_of_a_batch_size_are_the_balanced_sizes():
    assert ConsecutiveBatches.of(5000, 156).sizes == balanced_batch_sizes(5000, 156)
    assert ConsecutiveBatches.of(10, 3).sizes == (3, 3, 2, 2)
    with pytest.raises(InvalidParameterError, match="num_batches"):
        ConsecutiveBatches(3, 4)


def test_fixed_flow_sends_one_message_per_sender_to_sender_mod_receivers():
    routes = aggregate_routes(NoCountermeasure())
    [result] = [f for f in routes.static_flows if f.sender == "computef0"]
    assert result.kind == "fixed"
    edges = routes.edges(result)
    compute = routes.node_ids("computef0").tolist()
    [node] = routes.node_ids("result").tolist()
    assert edge_set(edges) == [(c, node, 1) for c in compute]
    assert routes.receivers_of(result, 3).tolist() == [0]


def test_broadcast_reaches_every_receiver():
    routes = kmeans_routes(LocalFlooding(sampling_rate=0.5, num_dummies=1))
    [broadcast] = [f for f in routes.static_flows if f.kind == "broadcast"]
    edges = routes.edges(broadcast)
    compute = routes.node_ids(broadcast.sender).tolist()
    sources = routes.node_ids(broadcast.receiver).tolist()
    assert edge_set(edges) == sorted((c, s, 1) for c in compute for s in sources)
    assert routes.receivers_of(broadcast, 1).tolist() == list(range(10))


def test_a_broadcast_through_scramblers_goes_to_every_scrambler_then_to_each_member():
    routes = kmeans_routes(SCRAMBLERS)
    kinds = {f.kind: f for f in routes.static_flows}
    to_scramblers = kinds["broadcast_to_scramblers"]
    from_scramblers = kinds["broadcast_from_scramblers"]
    assert to_scramblers.via == from_scramblers.via == "iteration 2"
    group = scrambler_group_name("iteration 2")
    scramblers = routes.node_ids(group).tolist()
    compute = routes.node_ids(to_scramblers.sender).tolist()
    assert edge_set(routes.edges(to_scramblers)) == sorted(
        (c, k, 1) for c in compute for k in scramblers
    )
    # Scrambler k relays the 3 centroids to each of its members: batches 3, 3, 2, 2.
    batches = routes.batches("iteration 2")
    assert batches.sizes == (3, 3, 2, 2)
    sources = routes.node_ids(from_scramblers.receiver)
    expected = sorted(
        (scramblers[k], int(sources[s]), 3) for k in range(4) for s in batches.members(k)
    )
    assert edge_set(routes.edges(from_scramblers)) == expected
    assert routes.receivers_of(from_scramblers, 2).tolist() == [6, 7]
    assert routes.relayed_outputs(from_scramblers) == 3


@pytest.mark.parametrize(
    "countermeasure", [NoCountermeasure(), LocalFlooding(sampling_rate=0.5), SCRAMBLERS]
)
@pytest.mark.parametrize("workload", ["aggregate", "kmeans"])
def test_partitions_and_the_central_view_record_each_static_edge_once(countermeasure, workload):
    routes = (
        aggregate_routes(countermeasure, sources=12)
        if workload == "aggregate"
        else kmeans_routes(countermeasure, sources=12)
    )
    cuts = [0, 6, 12] if routes.scrambled_flows else [0, 5, 7, 12]
    owners = [routes.ownership(a, b) for a, b in itertools.pairwise(cuts)]
    owners.append(Ownership(central=True))
    for flow in routes.static_flows:
        whole = edge_set(routes.edges(flow))
        pieces = sorted(e for owner in owners for e in edge_set(routes.edges(flow, owner)))
        assert pieces == whole, flow.name


def test_a_partition_owns_its_sources_in_every_logical_group_and_their_scramblers():
    routes = kmeans_routes(SCRAMBLERS, sources=12, iterations=2)
    owner = routes.ownership(6, 12)
    assert owner.ranges["sources"] == owner.ranges["sources@1"] == (6, 12)
    assert owner.ranges[scrambler_group_name("iteration 1")] == (2, 4)
    assert "compute" not in owner.ranges and "result" not in owner.ranges


def test_output_routes_and_the_outputs_senders_wait_for():
    routes = kmeans_routes(SCRAMBLERS, iterations=3)
    assert [f.kind for f in routes.output_routes("iteration 1")] == ["broadcast_to_scramblers"]
    assert [f.kind for f in routes.output_routes("iteration 3")] == ["fixed"]
    assert routes.incoming_outputs("iteration 1") == ()
    [(data, relay)] = routes.incoming_outputs("iteration 2")
    assert data == "iteration 1" and relay.kind == "broadcast_from_scramblers"
    assert routes.result_outputs() == ("iteration 3",)
    aggregate = aggregate_routes(SCRAMBLERS)
    assert aggregate.result_outputs() == ("f0", "f1")
    assert [f.kind for f in aggregate.output_routes("f0")] == ["fixed"]


def test_data_dependent_flows_have_no_static_route():
    routes = aggregate_routes(SCRAMBLERS)
    assert {f.kind for f in routes.static_flows} <= set(STATIC_KINDS)
    scrambled = routes.transformed.flow("f0 (scrambled)")
    with pytest.raises(InvalidParameterError, match="data-independent"):
        routes.edges(scrambled)
    with pytest.raises(InvalidParameterError, match="flow"):
        routes.batches("f1")  # a single target: no scramblers
