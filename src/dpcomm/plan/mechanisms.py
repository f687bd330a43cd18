"""The mechanism the accountant sees for a countermeasure (without the plan's accounting).

Kept apart from `dpcomm.plan.privacy`, which composes guarantees with dp_accounting: the
CLI's ``account`` and ``audit`` declare a mechanism without loading it.
"""

from __future__ import annotations

from typing import overload

from dpcomm.accounting.mechanisms import LocalRandomizer, ScramblerMechanism
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers


@overload
def countermeasure_mechanism(
    countermeasure: LocalFlooding, num_targets: int, batch_size: int | None = None
) -> LocalRandomizer: ...


@overload
def countermeasure_mechanism(
    countermeasure: Scramblers, num_targets: int, batch_size: int | None = None
) -> ScramblerMechanism: ...


@overload
def countermeasure_mechanism(
    countermeasure: LocalFlooding | Scramblers, num_targets: int, batch_size: int | None = None
) -> LocalRandomizer | ScramblerMechanism: ...


def countermeasure_mechanism(
    countermeasure: LocalFlooding | Scramblers, num_targets: int, batch_size: int | None = None
) -> LocalRandomizer | ScramblerMechanism:
    """The mechanism the accountant sees for ``countermeasure`` over T = ``num_targets``.

    Local flooding is R_σ^d; scramblers are A_σ^{n,d} of ``batch_size`` sources (default: the
    countermeasure's n), capped as the countermeasure is.
    """
    if isinstance(countermeasure, LocalFlooding):
        return LocalRandomizer(
            num_targets=num_targets,
            sampling_rate=countermeasure.sampling_rate,
            num_dummies=countermeasure.num_dummies,
        )
    return ScramblerMechanism(
        num_targets=num_targets,
        sampling_rate=countermeasure.sampling_rate,
        batch_size=countermeasure.batch_size if batch_size is None else batch_size,
        num_dummies=countermeasure.num_dummies,
        capped=countermeasure.capped,
    )
