"""Worked example 1: account one cluster, compose rounds, plan a whole query, run the plan.

A city wants the number of residents per neighbourhood (T = 20 compute nodes, one per
neighbourhood group) from 10,000 phones, with ε ≤ 1 at δ = 1e-4 for the whole query.

Run: python examples/account_and_plan.py
"""

from __future__ import annotations

import dpcomm
from dpcomm import ScramblerMechanism, account


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
    plan = dpcomm.calibrate(
        sources=10_000,
        num_targets=20,
        epsilon=1.0,
        delta=1e-4,
        grouping_sets=1,
        max_channels=200,
    )
    print(f"planned: {plan.describe()}")
    print(
        f"  {plan.network_load_messages:,} messages, "
        f"at most {plan.max_channels_per_node} channels per node, "
        f"{plan.extra_consents:,} extra consents; {len(plan.pareto)} configurations on the "
        "Pareto front"
    )
    assert plan.epsilon <= 1.0

    # 4. Run the query with the planned countermeasure on the phones recruited: the run reports
    #    the planned ε. The counts are over the tuples that arrived (each with probability
    #    P = 1 − σ + σ/T); estimate="unbiased" divides them by P, in columns named
    #    "residents (estimate)" with their standard error and 95% interval beside them.
    #    Neither is DP: the countermeasures hide the traffic, not the values.
    phones = dpcomm.datasets.synthetic(rows=plan.sources_recruited, seed=1)
    run = dpcomm.run_sql(
        "SELECT g1 AS neighbourhood, COUNT(*) AS residents FROM phones GROUP BY g1",
        phones,
        countermeasure=plan.countermeasure,
        num_targets=20,
        delta=1e-4,
        seed=2,
        estimate="unbiased",
    )
    shown = ["neighbourhood", "residents (estimate)", "residents (se)"]
    print(run.result.sort_values("neighbourhood")[shown].head(3).to_string(index=False))
    print(f"  the run's ε = {run.report.privacy.epsilon:.4f} at δ = 1e-4")
    assert abs(run.report.privacy.epsilon - plan.epsilon) < 1e-9
    estimated_total = run.result["residents (estimate)"].sum()
    assert abs(estimated_total - plan.sources_recruited) < 0.1 * plan.sources_recruited


if __name__ == "__main__":
    main()
