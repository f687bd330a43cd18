"""What an engine is, and the one place where an engine is chosen by its name.

An engine runs a program's roles with countermeasures and returns a [`Run`][]
([`Engine.execute`][]), and runs the same program without countermeasures and without
accounting, the non-private baseline a report compares with ([`Engine.baseline`][], where the
engine says where that run happens). [`make_engine`][] builds the engine of a name and its
options: the front door (``dpcomm.run_sql(engine="dask")``) and every command of the CLI call it.
"""

from __future__ import annotations

from typing import Any, Protocol, Unpack, runtime_checkable

from dpcomm.engine.memory import simulate
from dpcomm.engine.run import Run, RunOptions
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasures, NoCountermeasure
from dpcomm.queries.program import QueryProgram


@runtime_checkable
class Engine(Protocol):
    """Something that runs a program with countermeasures (the memory, Dask or network engine)."""

    #: The engine's name (``memory``, ``dask``, ``network``).
    name: str
    #: Whether its workers read the sources' rows themselves, partition by partition (a program
    #: over a row source then never holds the rows in this process: the Dask engine).
    reads_row_sources: bool

    def execute(
        self, program: QueryProgram, countermeasures: Countermeasures, **options: Unpack[RunOptions]
    ) -> Run:
        """Run ``program`` with ``countermeasures``: the [`Run`][]."""
        ...

    def baseline(self, program: QueryProgram, *, seed: int | None = None) -> Run:
        """``program`` without countermeasures and not accounted (``run.privacy`` is None)."""
        ...


class MemoryEngine:
    """The in-memory engine (the vectorized simulator): [`dpcomm.engine.memory.simulate`][]."""

    name = "memory"
    reads_row_sources = False

    def execute(
        self, program: QueryProgram, countermeasures: Countermeasures, **options: Unpack[RunOptions]
    ) -> Run:
        """[`simulate`][] ``program`` with ``countermeasures``."""
        return simulate(program, countermeasures, **options)

    def baseline(self, program: QueryProgram, *, seed: int | None = None) -> Run:
        """``program`` without countermeasures, in memory, not accounted."""
        return simulate(program, NoCountermeasure(), delta=None, seed=seed)


#: The engines `make_engine` builds by name, with the options each takes.
ENGINE_OPTIONS: dict[str, tuple[str, ...]] = {
    "memory": (),
    "dask": (
        "client",
        "scheduler",
        "partitions",
        "workers",
        "collect_traffic",
        "progress_stream",
        "connect_timeout",
    ),
    "network": (
        "transport",
        "timeout",
        "idle_seconds",
        "workdir",
        "faults",
        "force",
        "max_left_out",
    ),
}


def make_engine(engine: str | Engine = "memory", **options: Any) -> Engine:
    """The engine called ``engine`` (``"memory"``, ``"dask"``, ``"network"``) with ``options``.

    An engine object is returned as it is. Options set to None are unset; an option the engine
    does not take is refused, naming it. ``"dask"``: a
    [`DaskEngine`][] (``scheduler``, ``partitions``, ``workers``,
    ...; a scheduler's cluster has its own workers); ``"network"``: a
    `dpcomm.engine.network.deploy.NetworkEngine` (``transport``, ``timeout``,
    ``idle_seconds``, ``workdir``, ``faults``, ``force``, ``max_left_out``).

    Examples:
        >>> from dpcomm.engine.engines import make_engine
        >>> make_engine("memory").name
        'memory'
        >>> make_engine("memory", workers=2)
        Traceback (most recent call last):
        ...
        dpcomm.errors.InvalidParameterError: invalid workers: expected only with engine='dask', ...
    """
    given = {name: value for name, value in options.items() if value is not None}
    if not isinstance(engine, str):
        if not isinstance(engine, Engine):
            raise InvalidParameterError(
                "engine", "'memory', 'dask', 'network' or an engine object", engine
            )
        for name, value in given.items():
            raise InvalidParameterError(name, "unset when an engine object is given", value)
        return engine
    if engine not in ENGINE_OPTIONS:
        raise InvalidParameterError(
            "engine", "'memory', 'dask', 'network' or an engine object", engine
        )
    for name, value in given.items():
        if name not in ENGINE_OPTIONS[engine]:
            owners = [other for other, names in ENGINE_OPTIONS.items() if name in names]
            allowed = " or ".join(f"engine={owner!r}" for owner in owners)
            raise InvalidParameterError(
                name, f"only with {allowed}" if owners else f"no option {name}", value
            )
    if engine == "dask":
        from dpcomm.engine.dask_engine import DaskEngine

        if "scheduler" in given and "workers" in given:
            raise InvalidParameterError(
                "workers", "unset with a scheduler (its cluster has its own)", given["workers"]
            )
        return DaskEngine(**given)
    if engine == "network":
        from dpcomm.engine.network.deploy import NetworkEngine

        return NetworkEngine(**given)
    return MemoryEngine()
