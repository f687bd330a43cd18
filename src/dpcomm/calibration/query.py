"""The shape a calibration is made for, read from the query (or the points) it will run.

[`query_shape`][] compiles ``sql`` over ``data`` as [`run_sql`][dpcomm.run_sql] does (or
reads K-means' points) and gives its [`PlanShape`][]: what [`dpcomm.calibrate`][] and
``dpcomm plan --sql --data`` calibrate for.
"""

from __future__ import annotations

from typing import Any

from dpcomm.calibration.shape import PlanShape
from dpcomm.data.inputs import DATA_ALLOWED, points_of, table_of
from dpcomm.errors import InvalidParameterError
from dpcomm.validation import MAX_COUNT, check_int


def query_shape(
    sql: object, data: Any, *, num_targets: int | None = None, iterations: int | None = None
) -> PlanShape:
    """The shape of the plan ``sql`` over ``data`` compiles to (what `dpcomm.run_sql` runs).

    What [`calibrate`][dpcomm.calibrate] and ``dpcomm plan --sql --data`` calibrate for:
    S = the table's rows, T = ``num_targets`` (default 20), the non-empty grouping sets
    (composed) and the empty one (free). Without ``sql``: K-means over the points ``data``
    (what [`kmeans`][dpcomm.kmeans] runs) with ``iterations`` and K = ``num_targets``. A
    query whose only grouping set is the empty one is refused (naming ``sql``): its traffic
    needs no countermeasure.

    Examples:
        >>> from dpcomm import datasets
        >>> from dpcomm.api import query_shape
        >>> people = datasets.synthetic(rows=300, seed=1)
        >>> shape = query_shape("SELECT g1, COUNT(*) FROM t GROUP BY CUBE(g1, g2)", people)
        >>> shape.num_sources, shape.num_clusters, shape.free_clusters
        (300, 3, ('()',))
    """
    if sql is None:
        if iterations is None:
            raise InvalidParameterError(
                "data",
                "given with sql= (an Aggregate query over this table) or with iterations= and "
                "num_targets= (K-means over these points)",
                data,
            )
        if num_targets is None:
            raise InvalidParameterError("num_targets", "K, the centroids (K-means)", None)
        points = points_of("data", data)
        iterations = check_int("iterations", iterations, minimum=1, maximum=MAX_COUNT)
        return PlanShape(
            workload="kmeans",
            num_sources=len(points),
            num_targets=check_int("num_targets", num_targets, minimum=2, maximum=MAX_COUNT),
            clusters=tuple(f"iteration {i + 1}" for i in range(iterations)),
        )
    if iterations is not None:
        raise InvalidParameterError("iterations", "None with sql= (an Aggregate query)", iterations)
    return program_shape(query_program(sql, data, num_targets=num_targets), sql)


def query_program(sql: object, data: Any, *, num_targets: int | None, **release: Any) -> Any:
    """The `dpcomm.queries.aggregate.AggregateProgram` of ``sql`` over ``data``.

    ``release`` (``release``, ``bounds``, ``keys``) as `dpcomm.run_sql` takes them.
    """
    from dpcomm.pipeline.job import ReleaseSpec, compile_aggregate
    from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS

    if not isinstance(sql, str):
        raise InvalidParameterError("sql", "an Aggregate query (text)", sql)
    if data is None:
        raise InvalidParameterError("data", f"with sql=: {DATA_ALLOWED}", data)
    source = table_of(data, "data")  # a row source is bound to its schema, S its rows: not read
    asked = ReleaseSpec.of(release.pop("release", None), **release)
    return compile_aggregate(
        sql,
        source,
        release=asked,
        countermeasure=None,
        num_targets=DEFAULT_NUM_TARGETS if num_targets is None else num_targets,
    )


def program_shape(program: Any, sql: object) -> PlanShape:
    """The `PlanShape` of a query's program; refused (naming ``sql``) without clusters.

    A table without rows is refused too (naming ``data``): no source sends anything.
    """
    if not program.num_sources:
        raise InvalidParameterError(
            "data",
            "a table with rows to calibrate for (a table without rows sends nothing: run it "
            "with dpcomm.NoCountermeasure(), ε = 0)",
            "a table without rows",
        )
    shape = PlanShape.of_plan(program.plan, workload="aggregate")
    if not shape.clusters:
        raise InvalidParameterError(
            "sql",
            "a query with a non-empty grouping set (the empty one's traffic is independent of "
            "the data: run it with dpcomm.NoCountermeasure(), ε = 0)",
            sql,
        )
    return shape
