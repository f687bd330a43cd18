"""Worked example 3: the same query deployed between separate processes over TLS 1.3.

120 sources, 3 scramblers and 4 compute nodes per grouping set run as processes on this
machine, talking over mutually authenticated TLS 1.3 with sealed payloads of one length. With
the same seed the deployment is the simulator's run: the same result and delivered tuples.

Run: python examples/deployment.py      (a few seconds: the nodes share a few processes)
"""

from __future__ import annotations

import numpy as np

from dpcomm.data import synthetic_table
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.pipeline.runs import run_aggregate
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT g1, COUNT(*), AVG(m1) FROM t GROUP BY GROUPING SETS ((g1), (g2))"


def main() -> None:
    """Run the example and check what it prints."""
    table = synthetic_table(num_rows=120, num_intervals=6, seed=5)
    program = AggregateProgram.from_sql(SQL, table, num_targets=4)
    countermeasure = Scramblers(sampling_rate=0.2, batch_size=40, num_dummies=10)
    simulated = run_aggregate(program, countermeasure, delta=1e-4, seed=11)
    deployed = run_aggregate(
        program, countermeasure, delta=1e-4, seed=11, engine=NetworkEngine(transport="tls")
    )
    print(f"ε = {deployed.report.privacy.epsilon:.4f} at δ = 1e-4")
    for row in deployed.rows[:3]:
        print(row)
    assert deployed.rows == simulated.rows
    for flow, mask in simulated.run.delivered.items():
        assert np.array_equal(mask, deployed.run.delivered[flow])
    wire = deployed.run.details.wire
    print(f"on the wire: {wire.frames:,} frames, of lengths {list(wire.frame_lengths_observed)}")
    assert len(wire.frame_lengths_observed) == 1  # every frame the same length
    print("the deployment is the simulator's run (same result, same delivered tuples)")


if __name__ == "__main__":
    main()
