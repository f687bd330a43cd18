"""Shared by ``account`` and ``audit``: the mechanism of ``local|scrambler`` and its options."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dpcomm.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpcomm.accounting import LocalRandomizer, ScramblerMechanism


def check_family_options(args: argparse.Namespace, command: str) -> None:
    """``--batch`` and ``--capped`` only for ``scrambler``, which needs ``--batch``."""
    if args.kind == "local":
        if args.batch_size is not None:
            raise InvalidParameterError("--batch", f"unset for '{command} local'", args.batch_size)
        if args.capped:
            raise InvalidParameterError("--capped", f"unset for '{command} local'", True)
    elif args.batch_size is None:
        raise InvalidParameterError("--batch", "a batch size n >= 1 for a scrambler", None)


def declared_mechanism(
    *,
    num_targets: int,
    sampling_rate: float,
    num_dummies: int,
    batch_size: int | None,
    capped: bool,
) -> LocalRandomizer | ScramblerMechanism:
    """The local randomizer when ``batch_size`` is None, else the (capped) scrambler."""
    from dpcomm.accounting import LocalRandomizer, ScramblerMechanism

    if batch_size is None:
        return LocalRandomizer(
            num_targets=num_targets, sampling_rate=sampling_rate, num_dummies=num_dummies
        )
    return ScramblerMechanism(
        num_targets=num_targets,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        num_dummies=num_dummies,
        capped=capped,
    )


def mechanism_kind(mechanism: LocalRandomizer | ScramblerMechanism) -> str:
    """``local randomizer``, ``scrambler`` or ``capped scrambler``."""
    from dpcomm.accounting import LocalRandomizer

    if isinstance(mechanism, LocalRandomizer):
        return "local randomizer"
    return "capped scrambler" if mechanism.capped else "scrambler"
