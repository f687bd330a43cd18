"""Errors raised by dpcomm; every layer may import this module."""

from __future__ import annotations


class DpcommError(Exception):
    """Base class of every error dpcomm raises on purpose."""


class InvalidParameterError(DpcommError, ValueError):
    """A parameter is outside its allowed range.

    The message names the parameter, the allowed values and the value given, on one line.
    """

    def __init__(self, name: str, allowed: str, given: object) -> None:
        self.name = name
        self.allowed = allowed
        self.given = given
        super().__init__(f"invalid {name}: expected {allowed}, got {given!r}")


class DpcommWarning(UserWarning):
    """A documented outcome the user should know about (e.g. σ = 1 uses ~1/T of the tuples)."""
