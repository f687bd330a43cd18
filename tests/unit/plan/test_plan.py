"""The execution model (Section 2) and Theorem 2 on hand-computed cases."""

import math
import subprocess
import sys

import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import (
    ExecutionPlan,
    Flow,
    LocalFlooding,
    NoCountermeasure,
    NodeGroup,
    Scramblers,
    account_plan,
    batch_size_counts,
    countermeasure_from_arguments,
)
from dpcomm.plan.builders import kmeans_plan
from dpcomm.queries.kmeans import KMeansProgram


def running_example(num_sources=10_000, compute=20):
    """Example 1 of the paper: sources send (a, i) to C_1 and (b, i) to C_2; both to R."""
    groups = (
        NodeGroup("sources", "source", num_sources, holds_data=True),
        NodeGroup("C1", "compute", compute),
        NodeGroup("C2", "compute", compute),
        NodeGroup("R", "result", 1),
    )
    flows = (
        Flow("S1", "sources", "C1", "data", 1),
        Flow("S2", "sources", "C2", "data", 2),
        Flow("C1->R", "C1", "R", "fixed"),
        Flow("C2->R", "C2", "R", "fixed"),
    )
    return ExecutionPlan(groups, flows)


def test_running_example_has_the_papers_clusters():
    plan = running_example()
    assert not plan.is_simple("sources")
    assert [g.name for g in plan.logical_groups] == ["sources#1", "sources#2", "C1", "C2"]
    clusters = {c.name: c for c in plan.clusters}
    assert set(clusters) == {"S1", "S2", "C1->R", "C2->R"}
    assert clusters["S1"].data_dependent and clusters["S1"].num_targets == 20
    assert not clusters["C1->R"].data_dependent
    path = {c.name for c in plan.data_path("sources")}
    assert path == {"S1", "S2", "C1->R", "C2->R"}


def test_logical_nodes_share_the_physical_identity():
    plan = running_example(num_sources=5, compute=3)
    assert plan.node_ids("sources") == range(0, 5)
    assert plan.node_ids("C1") == range(5, 8)
    assert plan.num_nodes == 5 + 3 + 3 + 1


def test_theorem_2_sums_the_clusters_on_the_path():
    """δ is the whole plan's: basic composition puts each of the 2 clusters at δ/2."""
    plan = running_example()
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    guarantee = account_plan(plan, countermeasure, delta=1e-4)
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
    )
    single = account(mechanism, delta=5e-5, monte_carlo_samples=0).guarantee
    assert guarantee.delta_per_cluster == pytest.approx(5e-5)
    assert guarantee.basic_epsilon == pytest.approx(2 * single.epsilon)
    # The PLD composition of the two rounds is valid at the whole δ and tighter here.
    two_rounds = account(mechanism, delta=1e-4, rounds=2, monte_carlo_samples=0)
    assert guarantee.pld_epsilon == pytest.approx(two_rounds.method_values()["pld"])
    assert guarantee.guarantee.epsilon == min(guarantee.basic_epsilon, guarantee.pld_epsilon)
    assert guarantee.guarantee.epsilon < guarantee.basic_epsilon
    assert guarantee.guarantee.delta == pytest.approx(1e-4)
    assert guarantee.guarantee.method.startswith("pld(")
    assert guarantee.lower_bound is not None
    assert guarantee.lower_bound <= guarantee.guarantee.epsilon
    assert guarantee.lower_bound == pytest.approx(two_rounds.lower_bound, abs=1e-9)
    assert guarantee.cluster("C1->R").guarantee.epsilon == 0.0
    assert guarantee.caveats == ()


def test_basic_composition_only_when_asked():
    plan = running_example()
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    guarantee = account_plan(plan, countermeasure, delta=1e-4, compose_pld=False)
    assert guarantee.pld_epsilon is None and guarantee.lower_bound is None
    assert guarantee.guarantee.epsilon == guarantee.basic_epsilon
    assert guarantee.guarantee.method.startswith("theorem-2(")


def test_theorem_1_per_cluster_by_hand():
    # ε = ln((1 − σ)T / (σ(d + 1)) + 1) = ln(0.5·20/(0.5·4) + 1) = ln 6 per cluster.
    plan = running_example()
    guarantee = account_plan(plan, LocalFlooding(sampling_rate=0.5, num_dummies=3), delta=0)
    assert guarantee.guarantee.epsilon == pytest.approx(2 * math.log(6))
    assert guarantee.guarantee.delta == 0.0


def test_countermeasures_per_cluster_and_none_is_infinite():
    plan = running_example()
    mixed = account_plan(
        plan,
        {"S1": LocalFlooding(sampling_rate=0.5, num_dummies=3), "S2": NoCountermeasure()},
        delta=0,
    )
    assert mixed.cluster("S1").guarantee.epsilon == pytest.approx(math.log(6))
    assert math.isinf(mixed.cluster("S2").guarantee.epsilon)
    assert math.isinf(mixed.guarantee.epsilon)
    with pytest.raises(InvalidParameterError, match="countermeasures"):
        account_plan(plan, {"nope": NoCountermeasure()}, delta=0)


def test_only_the_clusters_on_a_path_add_up():
    # Two disjoint populations, each sending to its own compute group: parallel composition.
    groups = (
        NodeGroup("P", "source", 100, holds_data=True),
        NodeGroup("Q", "source", 100, holds_data=True),
        NodeGroup("CP", "compute", 10),
        NodeGroup("CQ", "compute", 10),
    )
    flows = (Flow("p", "P", "CP", "data"), Flow("q", "Q", "CQ", "data"))
    plan = ExecutionPlan(groups, flows)
    guarantee = account_plan(
        plan,
        {
            "p": LocalFlooding(sampling_rate=0.5, num_dummies=0),
            "q": LocalFlooding(sampling_rate=0.9, num_dummies=0),
        },
        delta=0,
    )
    local = LocalRandomizer(num_targets=10, sampling_rate=0.5)
    expected = account(local, delta=0).guarantee.epsilon
    assert guarantee.guarantee.epsilon == pytest.approx(expected)
    assert guarantee.worst_path == ("p",)


def test_disjoint_senders_to_the_same_targets_form_one_cluster():
    groups = (
        NodeGroup("P", "source", 100, holds_data=True),
        NodeGroup("Q", "source", 50, holds_data=True),
        NodeGroup("C", "compute", 10),
    )
    plan = ExecutionPlan(groups, (Flow("p", "P", "C", "data"), Flow("q", "Q", "C", "data")))
    assert [c.name for c in plan.clusters] == ["p+q"]
    assert plan.clusters[0].num_senders == 150


def test_balanced_batches_are_each_accounted_at_their_own_size():
    # ⌈1050/100⌉ = 11 scramblers: 5 of 96 and 6 of 95 sources, never a short one of 50.
    assert batch_size_counts(1050, 100) == {96: 5, 95: 6}
    assert batch_size_counts(30, 100) == {30: 1}
    assert batch_size_counts(5000, 156) == {152: 17, 151: 16}
    plan = running_example(num_sources=1050)
    guarantee = account_plan(
        plan, Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50), delta=1e-4
    )
    parts = guarantee.cluster("S1").parts
    assert [(p.mechanism.batch_size, p.num_instances) for p in parts] == [(96, 5), (95, 6)]
    assert guarantee.cluster("S1").guarantee.epsilon == max(p.guarantee.epsilon for p in parts)
    assert parts[1].guarantee.epsilon > parts[0].guarantee.epsilon


def test_single_target_and_data_independent_clusters_are_perfectly_private():
    groups = (NodeGroup("S", "source", 10, holds_data=True), NodeGroup("C", "compute", 1))
    plan = ExecutionPlan(groups, (Flow("total", "S", "C", "data"),))
    guarantee = account_plan(plan, NoCountermeasure(), delta=1e-4)
    assert guarantee.guarantee.epsilon == 0.0
    assert guarantee.cluster("total").guarantee.method == "single-target"


def test_kmeans_plan_composes_over_iterations_with_a_caveat():
    import numpy as np

    points = np.random.default_rng(0).normal(size=(500, 3))
    program = KMeansProgram(points, 4, 3)
    countermeasure = Scramblers(sampling_rate=0.9, batch_size=100, num_dummies=10)
    guarantee = account_plan(program.plan, countermeasure, delta=1e-4)
    mechanism = ScramblerMechanism(num_targets=4, sampling_rate=0.9, batch_size=100, num_dummies=10)
    single = account(mechanism, delta=1e-4 / 3, monte_carlo_samples=0).guarantee
    three = account(mechanism, delta=1e-4, rounds=3, monte_carlo_samples=0)
    assert guarantee.basic_epsilon == pytest.approx(3 * single.epsilon)
    assert guarantee.guarantee.epsilon == pytest.approx(three.guarantee.epsilon)
    assert guarantee.guarantee.delta == pytest.approx(1e-4)
    assert len(guarantee.caveats) == 1 and "centroids" in guarantee.caveats[0]


def test_invalid_plans_and_countermeasures_are_rejected():
    with pytest.raises(InvalidParameterError, match="acyclic"):
        ExecutionPlan(
            (NodeGroup("A", "compute", 1), NodeGroup("B", "compute", 1)),
            (Flow("ab", "A", "B", "fixed"), Flow("ba", "B", "A", "fixed")),
        )
    with pytest.raises(InvalidParameterError, match="flow x"):
        ExecutionPlan((NodeGroup("A", "compute", 1),), (Flow("x", "A", "Z", "fixed"),))
    with pytest.raises(InvalidParameterError, match="role"):
        NodeGroup("A", "boss", 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="count of group A"):
        NodeGroup("A", "compute", 0)
    plan = running_example()
    with pytest.raises(InvalidParameterError, match="num_dummies"):
        account_plan(plan, LocalFlooding(sampling_rate=0.5, num_dummies=20), delta=0)
    with pytest.raises(InvalidParameterError, match="num_dummies"):
        account_plan(
            running_example(num_sources=1001),
            # Balanced batches of 91 or 92: at most (T − 1)·91 = 1,729 capped dummies.
            Scramblers(sampling_rate=0.5, batch_size=100, num_dummies=1730, capped=True),
            delta=1e-4,
        )
    with pytest.raises(InvalidParameterError, match="sampling_rate"):
        Scramblers(sampling_rate=1.5, batch_size=10)
    with pytest.raises(InvalidParameterError, match="mechanism"):
        countermeasure_from_arguments(mechanism="magic")
    with pytest.raises(InvalidParameterError, match="batch_size"):
        countermeasure_from_arguments(mechanism="scrambler", sampling=0.2)
    with pytest.raises(InvalidParameterError, match="sampling_rate"):
        countermeasure_from_arguments(mechanism="none", sampling=0.2)


def test_scramblers_are_added_as_nodes():
    from dpcomm.plan import with_countermeasure_nodes

    plan = running_example(num_sources=1050)
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    transformed = with_countermeasure_nodes(plan, {"S1": countermeasure})
    assert transformed.group("scramblers[S1]").count == 11
    assert transformed.group("scramblers[S1]").role == "scrambler"
    names = [f.name for f in transformed.flows]
    assert "S1 (to scramblers)" in names and "S1 (scrambled)" in names and "S2" in names
    assert not transformed.flow("S1 (to scramblers)").data_dependent
    assert transformed.flow("S1 (scrambled)").messages_per_sender == 96 + 50
    assert transformed.num_nodes == plan.num_nodes + 11
    # The sources no longer send S1's data-dependent message themselves: they are simple.
    assert transformed.is_simple("sources")


def test_a_cycle_of_flows_is_refused():
    groups = (
        NodeGroup("sources", "source", 4, holds_data=True),
        NodeGroup("C1", "compute", 2),
        NodeGroup("C2", "compute", 2),
    )
    flows = (
        Flow("S", "sources", "C1", "data"),
        Flow("C1->C2", "C1", "C2", "fixed"),
        Flow("C2->C1", "C2", "C1", "fixed"),
    )
    with pytest.raises(InvalidParameterError, match="a cycle through C1") as caught:
        ExecutionPlan(groups, flows)
    assert caught.value.name == "flows"


def test_a_plan_deeper_than_the_recursion_limit_is_checked():
    """K-means of I iterations is a path of about 2I groups: no RecursionError at I = 2000."""
    plan = kmeans_plan(num_sources=10, num_centroids=2, num_iterations=2000, message_bytes=8)
    assert len(plan.clusters) > 2000


def test_the_packages_transform_is_the_function_and_imported_on_first_use():
    """A countermeasure's user (``dpcomm account``) imports no plan model; importing the
    module ``dpcomm.plan.transform`` later leaves the function in the package's name."""
    code = (
        "import sys\n"
        "from dpcomm.plan import Scramblers\n"
        "from dpcomm.plan.codec import countermeasure_from_arguments\n"
        "print(sorted(m for m in sys.modules if m.startswith('dpcomm.plan.')))\n"
        "import dpcomm.plan.transform\n"
        "import dpcomm.plan\n"
        "from dpcomm.plan import transform\n"
        "from dpcomm.plan.transform import with_countermeasure_nodes\n"
        "print(transform is dpcomm.plan.transform, transform.__module__, callable(transform))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == [
        "['dpcomm.plan.codec', 'dpcomm.plan.countermeasures']",
        "True dpcomm.plan.transform True",
    ]
