"""The program registry: dpcomm's own kinds from their own modules, the user's kinds in the
processes that define them, and a spec that never makes a process import a module."""

from __future__ import annotations

from typing import Any

import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.queries.program import program_from_spec, register_program


class _Counting:
    """A user's program (only what the registry reads of it)."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    @classmethod
    def from_spec(cls, spec: Any) -> _Counting:
        return cls(spec)


def test_a_users_kind_is_registered_in_the_process_that_defines_it():
    register_program("test-counting")(_Counting)
    spec = {"kind": "test-counting", "module": __name__}
    assert program_from_spec(spec).spec == spec  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match="program module"):
        program_from_spec({"kind": "test-counting", "module": "os"})


def test_dpcomms_own_kinds_cannot_be_taken():
    with pytest.raises(InvalidParameterError, match="program kind"):
        register_program("aggregate")(_Counting)


def test_a_kind_nobody_registered_is_refused_without_importing_its_module():
    with pytest.raises(InvalidParameterError, match="registered program"):
        program_from_spec({"kind": "shell", "module": "dpcomm_test_never_imported"})
