"""A [`Budget`][]: an (ε, δ) for every run on one population, kept in a ledger file."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpcomm.budget.composition import COMPOSITION, Spent, admits, spent
from dpcomm.budget.ledger import Charge, Ledger, LedgerError, locked, read_ledger, write_ledger
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.validation import check_delta, check_number


class BudgetExceededError(DpcommError):
    """A run refused by its budget, before it ran: the ledger is unchanged.

    Attributes:
        ledger: the ledger's path.
        epsilon, delta: the run's charge that was refused.
        spent: what the ledger's charges had spent.
        budget: the budget (ε, δ).

    Examples:
        >>> import dpcomm, tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.json"
        >>> budget = dpcomm.Budget(epsilon=1.0, delta=1e-5, ledger=path)
        >>> before = path.read_bytes()
        >>> try:
        ...     budget.charge(epsilon=1.5, delta=0.0, kind="aggregate", query="q", method="exact")
        ... except dpcomm.BudgetExceededError as error:
        ...     print(error.epsilon, error.spent.charges, path.read_bytes() == before)
        1.5 0 True
    """

    def __init__(
        self,
        ledger: str,
        epsilon: float,
        delta: float,
        spent: Spent,
        budget: tuple[float, float],
    ) -> None:
        self.ledger = ledger
        self.epsilon = epsilon
        self.delta = delta
        self.spent = spent
        self.budget = budget
        if math.isinf(epsilon):
            why = (
                "a run of ε = inf (a data-dependent cluster without countermeasure) cannot be "
                "charged to a budget"
            )
        else:
            why = (
                f"this run's ε = {epsilon:.6g}, δ = {delta:.3g} with the ε = "
                f"{spent.epsilon:.6g}, δ = {spent.delta:.3g} already spent "
                f"({spent.charges} charges) "
                f"exceeds the budget ε = {budget[0]:g}, δ = {budget[1]:g} (basic composition)"
            )
        super().__init__(f"refused by the budget of ledger {ledger}: {why}; nothing ran")


def _path(ledger: object) -> Path:
    """The ledger's real path, its symlinks resolved once.

    The lock and the atomic replace then act on the file every path to it reaches: a link is
    never replaced by a private copy, which would fork the budget.
    """
    if not isinstance(ledger, str | os.PathLike) or str(ledger) == "":
        raise InvalidParameterError("ledger", "the path of a ledger file (JSON)", ledger)
    try:
        path = Path(ledger).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise InvalidParameterError(
            "ledger", "a path whose symlinks resolve", f"{ledger} ({error})"
        ) from None
    if path.is_dir():
        raise InvalidParameterError("ledger", "the path of a file, not a directory", str(ledger))
    if path.exists() and not path.is_file():
        raise InvalidParameterError(
            "ledger", "a regular file (not a FIFO, a device or a socket)", str(ledger)
        )
    if not path.parent.is_dir():
        raise InvalidParameterError(
            "ledger", "a path in an existing directory", f"{ledger} (no directory {path.parent})"
        )
    return path


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, init=False)
class Budget:
    """A privacy budget (ε, δ) that every run on one population charges, kept in ``ledger``.

    ``Budget(epsilon=, delta=, ledger=PATH)`` creates the ledger (a JSON file) with that
    budget if there is none at ``PATH``, and otherwise checks that the one there holds the same
    budget; ``Budget(ledger=PATH)`` opens an existing ledger with the budget it holds. Give it as
    ``budget=`` to [`dpcomm.run_sql`][] or [`dpcomm.kmeans`][] (``--ledger`` on the
    command line): before the run executes, the plan's guarantee (ε_i, δ_i), what the run
    reports, is charged; a run that would take Σ ε_i beyond ε or Σ δ_i beyond δ, or whose ε is
    inf, is refused ([`BudgetExceededError`][]) before anything runs, and the ledger is left
    byte for byte as it was. The charges compose by the basic composition filter, valid when
    queries and their parameters are chosen adaptively ([`dpcomm.budget.composition`][]).

    Attributes:
        epsilon: the budget's ε (finite, >= 0).
        delta: the budget's δ, in [0, 1).
        ledger: the ledger file.

    Examples:
        >>> import dpcomm, tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "population.json"
        >>> budget = dpcomm.Budget(epsilon=3.0, delta=1e-5, ledger=path)
        >>> budget.charge(epsilon=1.25, delta=1e-6, kind="aggregate", query="SELECT ...",
        ...               method="pld(exact)").epsilon
        1.25
        >>> budget.spent()
        Spent(epsilon=1.25, delta=1e-06, charges=1)
        >>> budget.remaining()
        (1.75, 9e-06)
        >>> dpcomm.Budget(ledger=path).epsilon
        3.0
    """

    epsilon: float
    delta: float
    ledger: Path

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        ledger: str | os.PathLike[str],
        accept_edits: bool = False,
    ) -> None:
        path = _path(ledger)
        if not isinstance(accept_edits, bool):
            raise InvalidParameterError("accept_edits", "True or False", accept_edits)
        if (epsilon is None) != (delta is None):
            missing = "delta" if delta is None else "epsilon"
            raise InvalidParameterError(missing, "given with the other (a budget's ε and δ)", None)
        asked = None
        if epsilon is not None and delta is not None:
            asked = (check_number("epsilon", epsilon, at_least=0.0), check_delta("delta", delta))
        with locked(path):
            if path.exists():
                stored = read_ledger(path, accept_edits=accept_edits)
                held = (stored.epsilon, stored.delta)
                if asked is not None and asked != held:
                    raise InvalidParameterError(
                        "epsilon and delta",
                        f"the budget ledger {path} holds (ε = {held[0]:g}, δ = {held[1]:g}), "
                        "or no budget to open it",
                        f"ε = {asked[0]:g}, δ = {asked[1]:g}",
                    )
                if accept_edits:
                    write_ledger(path, stored)  # signed again, as the current version
            elif asked is None:
                raise LedgerError(path, "no such file (give a budget's ε and δ to create it)")
            else:
                held = asked
                write_ledger(path, Ledger(*held))
        object.__setattr__(self, "epsilon", held[0])
        object.__setattr__(self, "delta", held[1])
        object.__setattr__(self, "ledger", path)

    def read(self) -> Ledger:
        """The ledger as it is now (its budget and every charge)."""
        return read_ledger(self.ledger)

    def charges(self) -> tuple[Charge, ...]:
        """Every charge so far, oldest first."""
        return self.read().charges

    def spent(self) -> Spent:
        """Σ ε_i and Σ δ_i of the charges so far (each rounded up)."""
        return spent((c.epsilon, c.delta) for c in self.charges())

    def remaining(self) -> tuple[float, float]:
        """The (ε, δ) left: the budget minus the charges, exactly, rounded down (>= 0)."""
        charges = self.charges()

        def left(total: float, used: list[float]) -> float:
            exact = Fraction(total) - sum((Fraction(u) for u in used), Fraction(0))
            near = float(max(exact, Fraction(0)))
            return near if Fraction(near) <= exact or near == 0.0 else math.nextafter(near, 0.0)

        return (
            left(self.epsilon, [c.epsilon for c in charges]),
            left(self.delta, [c.delta for c in charges]),
        )

    def charge(
        self,
        *,
        epsilon: float,
        delta: float,
        kind: str,
        query: str,
        method: str,
        countermeasure: Mapping[str, Any] | None = None,
        release: Mapping[str, Any] | None = None,
        engine: str | None = None,
        seed: int | None = None,
    ) -> Charge:
        """Charge (ε, δ) to the ledger, or refuse it leaving the ledger untouched.

        Under the ledger's lock: read (refused if its content was edited since dpcomm wrote
        it), check that the charge fits (the basic composition filter), append it, write
        atomically. Raises [`BudgetExceededError`][] when it does not fit (or ε is inf);
        the file is then not written at all. ``countermeasure``, ``release``, ``engine`` and
        ``seed`` are recorded with it ([`Charge`][]). A seed an earlier charge used is
        refused ([`InvalidParameterError`][]): two runs of one seed draw the same coins, so
        their guarantees do not compose (the filter holds for runs with fresh randomness).
        """
        if not (isinstance(epsilon, int | float) and isinstance(delta, int | float)):
            raise InvalidParameterError("epsilon", "a number (the run's ε and δ)", epsilon)
        if math.isnan(epsilon) or epsilon < 0 or not 0.0 <= delta <= 1.0:
            raise InvalidParameterError(
                "epsilon and delta", "ε >= 0 and δ in [0, 1]", f"ε = {epsilon}, δ = {delta}"
            )
        with locked(self.ledger):
            current = read_ledger(self.ledger)
            if (current.epsilon, current.delta, current.composition) != (
                self.epsilon,
                self.delta,
                COMPOSITION,
            ):
                raise LedgerError(self.ledger, "its budget changed since it was opened")
            if seed is not None and any(c.seed == seed for c in current.charges):
                raise InvalidParameterError(
                    "seed",
                    "a seed no earlier charge of this ledger used, or none (runs of one seed "
                    "draw the same randomness, and their guarantees do not compose)",
                    seed,
                )
            pairs = [(c.epsilon, c.delta) for c in current.charges]
            if not admits((self.epsilon, self.delta), pairs, (epsilon, delta)):
                raise BudgetExceededError(
                    str(self.ledger),
                    float(epsilon),
                    float(delta),
                    spent(pairs),
                    (self.epsilon, self.delta),
                )
            charge = Charge(
                _now(),
                kind,
                query,
                float(epsilon),
                float(delta),
                method,
                None if countermeasure is None else dict(countermeasure),
                None if release is None else dict(release),
                engine,
                seed,
            )
            write_ledger(self.ledger, current.with_charge(charge))
        return charge

    def __repr__(self) -> str:
        ledger = str(self.ledger)
        return f"Budget(epsilon={self.epsilon!r}, delta={self.delta!r}, ledger={ledger!r})"
