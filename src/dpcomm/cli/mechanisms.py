"""Shared by ``account`` and ``audit``: the mechanism of ``local|scrambler`` and its options."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpcomm.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpcomm.accounting import LocalRandomizer, ScramblerMechanism


def declared_mechanism(
    *,
    kind: str,
    num_targets: int,
    sampling_rate: float,
    num_dummies: int,
    batch_size: int | None,
    capped: bool,
) -> LocalRandomizer | ScramblerMechanism:
    """The mechanism of one cluster of T targets under the countermeasure ``kind`` names.

    ``local`` is R_σ^d (no ``batch_size``, not ``capped``); ``scrambler`` the (capped)
    scrambler of ``batch_size`` sources. The options are read as ``dpcomm run`` reads them
    (`dpcomm.plan.codec.countermeasure_from_arguments`).
    """
    from dpcomm.plan.codec import countermeasure_from_arguments
    from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
    from dpcomm.plan.mechanisms import countermeasure_mechanism

    countermeasure = countermeasure_from_arguments(
        mechanism=kind,
        sampling=sampling_rate,
        batch=batch_size,
        dummies=num_dummies,
        capped=capped,
    )
    if not isinstance(countermeasure, LocalFlooding | Scramblers):
        raise InvalidParameterError("mechanism", "'local' or 'scrambler'", kind)
    return countermeasure_mechanism(countermeasure, num_targets)


def mechanism_kind(mechanism: LocalRandomizer | ScramblerMechanism) -> str:
    """``local randomizer``, ``scrambler`` or ``capped scrambler``."""
    from dpcomm.accounting import LocalRandomizer

    if isinstance(mechanism, LocalRandomizer):
        return "local randomizer"
    return "capped scrambler" if mechanism.capped else "scrambler"
