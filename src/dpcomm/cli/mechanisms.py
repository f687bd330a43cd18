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
    from dpcomm.accounting import LocalRandomizer, ScramblerMechanism
    from dpcomm.plan.codec import countermeasure_from_arguments
    from dpcomm.plan.countermeasures import LocalFlooding, Scramblers

    countermeasure = countermeasure_from_arguments(
        mechanism=kind,
        sampling=sampling_rate,
        batch=batch_size,
        dummies=num_dummies,
        capped=capped,
    )
    if isinstance(countermeasure, Scramblers):
        return ScramblerMechanism(
            num_targets=num_targets,
            sampling_rate=countermeasure.sampling_rate,
            batch_size=countermeasure.batch_size,
            num_dummies=countermeasure.num_dummies,
            capped=countermeasure.capped,
        )
    if isinstance(countermeasure, LocalFlooding):
        return LocalRandomizer(
            num_targets=num_targets,
            sampling_rate=countermeasure.sampling_rate,
            num_dummies=countermeasure.num_dummies,
        )
    raise InvalidParameterError("mechanism", "'local' or 'scrambler'", kind)


def mechanism_kind(mechanism: LocalRandomizer | ScramblerMechanism) -> str:
    """``local randomizer``, ``scrambler`` or ``capped scrambler``."""
    from dpcomm.accounting import LocalRandomizer

    if isinstance(mechanism, LocalRandomizer):
        return "local randomizer"
    return "capped scrambler" if mechanism.capped else "scrambler"
