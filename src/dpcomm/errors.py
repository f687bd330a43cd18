"""Errors raised by dpcomm; every layer may import this module."""

from __future__ import annotations

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

    The message names the parameter, the allowed values and the value given (:func:`shown`),
    on one line.

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


class DpcommWarning(UserWarning):
    """A documented outcome the user should know about (e.g. σ = 1 uses ~1/T of the tuples)."""
