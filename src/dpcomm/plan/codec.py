"""The one codec of a countermeasure: to and from a dict, to and from ``dpcomm run``'s options.

A countermeasure's dict form is what a deployed round's spec carries, what a budget's ledger
records and what ``dpcomm plan --json`` prints: every key always present,

    {"mechanism": "scrambler", "sampling_rate": 0.2, "batch_size": 100, "num_dummies": 50,
     "capped": false}

(``batch_size`` is null for ``none`` and ``local``; ``sampling_rate`` and ``num_dummies`` are 0
for ``none``). `countermeasure_from_dict` also reads a dict that leaves out a key at its
default, so older or hand-written documents still read. Its command-line form is the options
of ``dpcomm run`` (``--mechanism``, ``--sampling``, ``--batch``, ``--dummies``, ``--capped``),
every value written out so that the command does not depend on a use case's defaults;
`run_command` builds a whole ``dpcomm run`` command around it.

Examples:
    >>> from dpcomm.plan import Scramblers
    >>> scramblers = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50)
    >>> countermeasure_to_dict(scramblers)["batch_size"]
    100
    >>> countermeasure_from_dict(countermeasure_to_dict(scramblers)) == scramblers
    True
    >>> countermeasure_arguments(scramblers)
    ['--mechanism', 'scrambler', '--sampling', '0.2', '--batch', '100', '--dummies', '50']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)

#: The keys of a countermeasure's dict form, in the order it is written.
COUNTERMEASURE_KEYS = ("mechanism", "sampling_rate", "batch_size", "num_dummies", "capped")
#: The names ``--mechanism`` (and the dict's ``mechanism``) takes.
MECHANISMS = ("none", "local", "scrambler")


def countermeasure_to_dict(countermeasure: Countermeasure) -> dict[str, Any]:
    """The dict form of ``countermeasure`` (every key of `COUNTERMEASURE_KEYS`, in order)."""
    batch_size = countermeasure.batch_size if isinstance(countermeasure, Scramblers) else None
    return {
        "mechanism": countermeasure.name,
        "sampling_rate": countermeasure.sampling_rate,
        "batch_size": batch_size,
        "num_dummies": getattr(countermeasure, "num_dummies", 0),
        "capped": isinstance(countermeasure, Scramblers) and countermeasure.capped,
    }


def countermeasure_from_dict(data: Mapping[str, Any]) -> Countermeasure:
    """The countermeasure of a dict form (`countermeasure_to_dict`'s inverse).

    ``mechanism`` is required; any other key left out takes its default (σ = 0, no batch,
    d = 0, uncapped). Raises `InvalidParameterError` naming the key, what it allows and the
    value got: an unknown key, an unknown mechanism, a key the mechanism does not take set to
    anything but its default, a value out of range.
    """
    if not isinstance(data, Mapping):
        raise InvalidParameterError(
            "countermeasure", "a mapping with keys " + ", ".join(COUNTERMEASURE_KEYS), data
        )
    for key in data:
        if key not in COUNTERMEASURE_KEYS:
            raise InvalidParameterError(
                "countermeasure", "keys among " + ", ".join(COUNTERMEASURE_KEYS), key
            )
    if "mechanism" not in data:
        raise InvalidParameterError("mechanism", "one of " + ", ".join(MECHANISMS), None)
    return _countermeasure(
        data["mechanism"],
        sampling_rate=data.get("sampling_rate", 0.0),
        batch_size=data.get("batch_size"),
        num_dummies=data.get("num_dummies", 0),
        capped=data.get("capped", False),
    )


def countermeasure_arguments(countermeasure: Countermeasure) -> list[str]:
    """The options of ``dpcomm run`` that choose ``countermeasure``.

    Every value the mechanism takes is written (the use case's defaults do not matter); σ is
    written by ``repr``, so that it reads back exactly.
    """
    arguments = ["--mechanism", countermeasure.name]
    if isinstance(countermeasure, NoCountermeasure):
        return arguments
    arguments += ["--sampling", repr(countermeasure.sampling_rate)]
    if isinstance(countermeasure, Scramblers):
        arguments += ["--batch", str(countermeasure.batch_size)]
    arguments += ["--dummies", str(countermeasure.num_dummies)]
    if isinstance(countermeasure, Scramblers) and countermeasure.capped:
        arguments.append("--capped")
    return arguments


def countermeasure_from_arguments(
    *,
    mechanism: str,
    sampling: float | None = None,
    batch: int | None = None,
    dummies: int | None = None,
    capped: bool = False,
    defaults: Mapping[str, float] | None = None,
) -> Countermeasure:
    """The countermeasure of ``dpcomm run``'s options (`countermeasure_arguments`' inverse).

    An option left unset (None) takes its default: for ``none``, σ = 0 and d = 0; for
    ``local``, σ from ``defaults["sampling"]`` and d = 0 (flooding is asked for); for
    ``scrambler``, σ, n and d from ``defaults`` (keys ``sampling``, ``batch``, ``dummies``).
    Without ``defaults`` σ = 0, d = 0, and a scrambler needs ``batch``. Errors name the
    countermeasure's parameter (``sampling_rate``, ``batch_size``, ``num_dummies``,
    ``capped``; the CLI prints its flag).
    """
    known = {} if defaults is None else defaults
    if mechanism == "none":
        sampling = 0.0 if sampling is None else sampling
    elif sampling is None:
        sampling = float(known.get("sampling", 0.0))
    if mechanism == "scrambler":
        if batch is None and "batch" in known:
            batch = int(known["batch"])
        if dummies is None:
            dummies = int(known.get("dummies", 0))
    return _countermeasure(
        mechanism,
        sampling_rate=sampling,
        batch_size=batch,
        num_dummies=0 if dummies is None else dummies,
        capped=capped,
    )


def _countermeasure(
    mechanism: object,
    *,
    sampling_rate: Any,
    batch_size: Any,
    num_dummies: Any,
    capped: Any,
) -> Countermeasure:
    """The countermeasure ``mechanism`` names, refusing a parameter it does not take."""
    if mechanism not in MECHANISMS:
        raise InvalidParameterError("mechanism", "one of " + ", ".join(MECHANISMS), mechanism)
    if mechanism == "none":
        _unset("sampling_rate", sampling_rate, 0.0, mechanism)
        _unset("num_dummies", num_dummies, 0, mechanism)
    if mechanism != "scrambler":
        _unset("batch_size", batch_size, None, mechanism)
        _unset("capped", capped, False, mechanism)
    if mechanism == "none":
        return NoCountermeasure()
    if mechanism == "local":
        return LocalFlooding(sampling_rate=sampling_rate, num_dummies=num_dummies)
    if batch_size is None:
        raise InvalidParameterError("batch_size", "a batch size n >= 1 for scramblers", None)
    return Scramblers(
        sampling_rate=sampling_rate, batch_size=batch_size, num_dummies=num_dummies, capped=capped
    )


def _unset(name: str, value: object, default: float | bool | None, mechanism: str) -> None:
    """Refuse ``value`` for a parameter ``mechanism`` does not take (its default passes)."""
    if value is default:
        return
    numbers = (int, float)
    if (
        isinstance(default, numbers)
        and not isinstance(default, bool)
        and isinstance(value, numbers)
        and not isinstance(value, bool)
        and value == default
    ):
        return
    wanted = "unset" if default is None else repr(default)
    raise InvalidParameterError(name, f"{wanted} for the {mechanism!r} mechanism", value)


# ------------------------------------------------------------------ a ``dpcomm run`` command
#: The use cases ``dpcomm run`` runs.
Workload = Literal["aggregate", "kmeans"]


def run_command(
    workload: Workload,
    countermeasure: Countermeasure,
    *,
    num_targets: int,
    sql: str | None = None,
    data: str | None = None,
    synthetic: int | None = None,
    sources: int | None = None,
    iterations: int | None = None,
    delta: float | None = None,
    target_epsilon: float | None = None,
    options: Sequence[str] = (),
    seed: int | None = None,
) -> list[str]:
    """The arguments (``dpcomm``, ``run``, ...) of the ``dpcomm run`` command of a run.

    Aggregate: ``sql`` over the ``data`` file or over a synthetic table of ``synthetic`` rows,
    on ``num_targets`` (T) compute nodes per grouping set (``--targets``); K-means: K =
    ``num_targets`` centroids (``--k``), ``iterations`` (I) on the first ``sources`` points of
    the default dataset. Then `countermeasure_arguments`, ``--delta`` (the whole plan's δ),
    ``--target-epsilon`` (refuse a plan whose ε exceeds it), ``options`` as they are (e.g. a
    release's) and ``--seed``; a value left None is left out.

    Examples:
        >>> from dpcomm.plan import LocalFlooding
        >>> " ".join(run_command("kmeans", LocalFlooding(sampling_rate=0.5, num_dummies=1),
        ...                      num_targets=10, sources=500, iterations=3, seed=1))
        'dpcomm run kmeans --sources 500 --k 10 --iterations 3 --mechanism local --sampling 0.5 --dummies 1 --seed 1'
    """  # noqa: E501
    arguments = ["dpcomm", "run", workload]
    if workload == "aggregate":
        if data is not None:
            arguments += ["--data", data]
        if synthetic is not None:
            arguments += ["--synthetic", str(synthetic)]
        if sql is not None:
            arguments += ["--sql", sql]
        arguments += ["--targets", str(num_targets)]
    elif workload == "kmeans":
        if sources is not None:
            arguments += ["--sources", str(sources)]
        arguments += ["--k", str(num_targets)]
        if iterations is not None:
            arguments += ["--iterations", str(iterations)]
    else:
        raise InvalidParameterError("workload", "'aggregate' or 'kmeans'", workload)
    arguments += countermeasure_arguments(countermeasure)
    if delta is not None:
        arguments += ["--delta", repr(delta)]
    if target_epsilon is not None:
        arguments += ["--target-epsilon", repr(target_epsilon)]
    arguments += options
    if seed is not None:
        arguments += ["--seed", str(seed)]
    return arguments
