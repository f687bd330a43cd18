"""Unbiased estimates of an Aggregate result: COUNT and SUM divided by the delivery probability.

Under local sampling R_σ each real tuple is counted independently with a known probability P
(1 − σ + σ/T), so a group's delivered COUNT and SUM have expectation P times the full ones.
"""

from __future__ import annotations

from typing import Any

from dpcomm.engine.run import Run
from dpcomm.engine.utility import flow_rows
from dpcomm.plan.countermeasures import NoCountermeasure
from dpcomm.queries.aggregate import AggregateProgram

Row = dict[str, Any]


def delivery_probabilities(program: AggregateProgram, run: Run) -> dict[str, float]:
    """P per grouping set: the probability that a real tuple is counted (1 − σ + σ/T under R_σ).

    Clusters without countermeasure, and single-target ones (which send straight), count
    every tuple.
    """
    from dpcomm.plan.costs import delivery_probability

    probabilities = {}
    for name in program.flow_names:
        chosen = run.transformed.countermeasures[name]
        targets = program.plan.group(program.plan.flow(name).receiver).count
        if isinstance(chosen, NoCountermeasure) or targets == 1:
            probabilities[name] = 1.0
        else:
            probabilities[name] = delivery_probability(
                sampling_rate=chosen.sampling_rate, num_targets=targets
            )
    return probabilities


def estimated_columns(program: AggregateProgram) -> frozenset[str]:
    """The output columns an unbiased estimate scales (COUNT and SUM; floats once scaled)."""
    return frozenset(
        o.name
        for o in program.query.outputs
        if o.kind == "aggregate" and o.function in ("count", "count_star", "sum")
    )


def unbiased_estimate(program: AggregateProgram, run: Run) -> tuple[list[Row], dict[str, float]]:
    """The result with COUNT and SUM divided by their grouping set's P (unbiased estimates).

    AVG, MIN and MAX are left as they are (a ratio or an extreme of the delivered tuples).
    Returns the rows and P per grouping set.
    """
    from dpcomm.errors import InvalidParameterError
    from dpcomm.queries.postprocess import finish

    if program.query.post is not None:
        raise InvalidParameterError(
            "estimate",
            "'none' for a query with WHERE, expressions, HAVING, ORDER BY, LIMIT or GROUPING() "
            "(unbiased estimates cover plain GROUP BY queries)",
            "unbiased",
        )
    probabilities = delivery_probabilities(program, run)
    scaled = estimated_columns(program)
    per_set: list[list[Row]] = []
    for name, flow_result in zip(program.flow_names, flow_rows(program, run.state), strict=True):
        factor = probabilities[name]
        per_set.append(
            [
                {
                    column: (
                        float(value) / factor if column in scaled and value is not None else value
                    )
                    for column, value in row.items()
                }
                for row in flow_result
            ]
        )
    return finish(program.query, per_set), probabilities


def estimate_label(probabilities: dict[str, float]) -> str:
    """What the report says of an unbiased estimate (P of every grouping set)."""
    shown = ", ".join(f"{name}: {p:.6g}" for name, p in probabilities.items())
    return f"unbiased: COUNT and SUM divided by the delivery probability P ({shown})"
