"""Worked example 1: account one cluster, compose rounds, and plan a whole query.

A city wants the number of residents per neighbourhood (T = 20 compute nodes, one per
neighbourhood group) from 10,000 phones, with ε ≤ 1 at δ = 1e-4 for the whole query.

Run: python examples/account_and_plan.py
"""

from __future__ import annotations

from dpcomm.accounting import ScramblerMechanism, account
from dpcomm.experiments.planner import plan_countermeasures


def main() -> None:
    """Run the example and check what it prints."""
    # 1. One scrambler of n = 100 phones, each sampling its target with σ = 0.2, the scrambler
    #    adding d = 50 dummies: what (ε, δ) does the traffic of one round have?
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
    )
    report = account(mechanism, delta=1e-4)
    guarantee = report.guarantee
    print(f"one round: ε = {guarantee.epsilon:.4f} at δ = 1e-4 ({guarantee.method})")
    if report.lower_bound is not None:
        print(f"  no valid bound can be below ε = {report.lower_bound:.4f} (certified lower bound)")

    # 2. The same phones answer 4 rounds (e.g. 4 grouping sets): the rounds compose.
    rounds = account(mechanism, delta=1e-4, rounds=4)
    print(
        f"four rounds: ε = {rounds.guarantee.epsilon:.4f} at δ = 1e-4 ({rounds.guarantee.method})"
    )

    # 3. The cheapest configuration (least messages) that reaches ε ≤ 1 for one grouping set,
    #    with at most 200 secure channels per node.
    plan = plan_countermeasures(
        num_sources=10_000,
        num_targets=20,
        epsilon=1.0,
        delta=1e-4,
        grouping_sets=1,
        max_channels=200,
    )
    print(f"planned: {plan.configuration.describe()}")
    print(
        f"  ε = {plan.epsilon:.4f}, {plan.network_load_messages:,} messages, "
        f"at most {plan.max_channels_per_node} channels per node, "
        f"{plan.extra_consents:,} extra consents"
    )
    assert plan.epsilon <= 1.0


if __name__ == "__main__":
    main()
