"""Errors raised by dpcomm; every layer may import this module."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any


def _rebuilt(kind: type[DpcommError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An error of ``kind`` with ``args`` and attributes ``state``, without its ``__init__``."""
    error = kind.__new__(kind, *args)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class DpcommError(Exception):
    """Base class of every error dpcomm raises on purpose.

    Errors pickle whatever their constructor's arguments: an error raised in a Dask worker
    reaches the client as itself (its type, one-line message and attributes).

    Examples:
        >>> import dpcomm
        >>> try:
        ...     dpcomm.calibrate(sources=50, num_targets=3, epsilon=1.0, delta=1e-4,
        ...                      max_channels=3)
        ... except dpcomm.DpcommError as error:
        ...     print(str(error).split(": ")[-1])
        relax max_channels by 7 (to 10)
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


#: Longest repr of a value (other than text) that an error message quotes as it is.
SHOWN_LENGTH = 200


def shown(value: object) -> str:
    """``repr(value)`` when it is one short line; else what ``value`` is, in a few words.

    What an error message says it was given: a DataFrame, a 2-d array or a long list given
    where a number or a short value was expected is described by its type and shape (or
    length), so that the message stays one readable line. Text is quoted whole.

    Examples:
        >>> import numpy as np
        >>> shown(1.5), shown("a"), shown(np.zeros((20, 3))), shown(list(range(1000)))
        ('1.5', "'a'", '<ndarray of shape (20, 3)>', '<list of length 1000>')
    """
    text = repr(value)
    if "\n" not in text and (len(text) <= SHOWN_LENGTH or isinstance(value, str)):
        return text
    kind = type(value).__name__
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return f"<{kind} of shape {shape}>"
    try:
        return f"<{kind} of length {len(value)}>"  # type: ignore[arg-type]
    except TypeError:
        return f"<{kind}>"


class InvalidParameterError(DpcommError, ValueError):
    """A parameter is outside its allowed range.

    The message names the parameter, the allowed values and the value given (`shown`),
    on one line.

    Examples:
        >>> import dpcomm
        >>> try:
        ...     dpcomm.Scramblers(sampling_rate=1.5, batch_size=100)
        ... except dpcomm.InvalidParameterError as error:
        ...     print(error.name, "|", error.given)
        sampling_rate | 1.5
    """

    def __init__(self, name: str, allowed: str, given: object) -> None:
        self.name = name
        self.allowed = allowed
        self.given = given
        super().__init__(f"invalid {name}: expected {allowed}, got {shown(given)}")


#: The packages each optional extra of ``pip install 'dpcomm[EXTRA]'`` brings (pyproject.toml).
EXTRA_PACKAGES = {"figures": ("matplotlib", "mlxtend")}


def require_extra(extra: str, needed_by: str, modules: tuple[str, ...] | None = None) -> None:
    """Refuse, in one line naming the extra to install, when a package of it is missing.

    ``modules``: the extra's packages ``needed_by`` imports (by default all of them).

    Raises:
        DpcommError: one of them cannot be imported.
    """
    wanted = EXTRA_PACKAGES[extra] if modules is None else modules
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if missing:
        raise DpcommError(
            f"{needed_by} needs the optional dependencies of dpcomm[{extra}] "
            f"({', '.join(missing)} missing): pip install 'dpcomm[{extra}]' "
            "(or, in a checkout, make, which installs the dev extras)"
        )


class DpcommWarning(UserWarning):
    """A documented outcome the user should know about (e.g. σ = 1 uses ~1/T of the tuples)."""


class BalancedBatchesWarning(DpcommWarning):
    """The scramblers' balanced batches give another ε than full batches of the n asked for.

    S senders are cut into ⌈S/n⌉ batches whose sizes differ by at most one
    (`dpcomm.plan.balanced_batch_sizes`), each accounted at its own size: a table whose
    size n does not divide runs smaller batches than asked for. Filter this category to
    silence it (``warnings.simplefilter("ignore", BalancedBatchesWarning)``).
    """


#: The folder of the package: frames of files inside it are dpcomm's own.
_PACKAGE = Path(__file__).resolve().parent


def _inside_package(filename: str) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(_PACKAGE)
    except (OSError, ValueError):
        return False


def warn(message: str, category: type[Warning] = DpcommWarning) -> None:
    """Warn ``message`` from the caller's own line: the first frame outside dpcomm.

    A warning raised deep in the library points at the user's call of the public function
    (``dpcomm.run_sql(...)`` in their script or test), not at a line of dpcomm, whatever the
    depth of the call (Python 3.12's ``skip_file_prefixes``, computed here as a
    ``stacklevel``). From dpcomm's own CLI, where every frame is the package's, it points at
    the outermost one.
    """
    frame = sys._getframe(1)
    level = 2  # stacklevel 2: the caller of this function
    while frame.f_back is not None and _inside_package(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
