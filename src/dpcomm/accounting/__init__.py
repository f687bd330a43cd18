"""Layer 1: the privacy accountant for communication patterns (pure mathematics, no I/O).

One module per family of bounds; :func:`account` dispatches a mechanism to every method
that applies and reports the smallest valid bound beside each method's own value. Names are
imported on first use, so that a submodule can be imported without the accountant (scipy).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.accounting.accountant import (
        METHOD_DESCRIPTIONS,
        METHOD_NAMES,
        AccountingReport,
        MethodResult,
        account,
        report_with_method,
    )
    from dpcomm.accounting.guarantee import (
        PrivacyGuarantee,
        compose_parallel,
        compose_sequential,
    )
    from dpcomm.accounting.mechanisms import (
        GenericLocalRandomizer,
        GenericScrambler,
        LocalRandomizer,
        Mechanism,
        ScramblerMechanism,
    )

__getattr__, __dir__ = attach(
    __name__,
    {
        "dpcomm.accounting.accountant": (
            "METHOD_DESCRIPTIONS",
            "METHOD_NAMES",
            "AccountingReport",
            "MethodResult",
            "account",
            "report_with_method",
        ),
        "dpcomm.accounting.guarantee": (
            "PrivacyGuarantee",
            "compose_parallel",
            "compose_sequential",
        ),
        "dpcomm.accounting.mechanisms": (
            "GenericLocalRandomizer",
            "GenericScrambler",
            "LocalRandomizer",
            "Mechanism",
            "ScramblerMechanism",
        ),
    },
)

__all__ = [
    "METHOD_DESCRIPTIONS",
    "METHOD_NAMES",
    "AccountingReport",
    "GenericLocalRandomizer",
    "GenericScrambler",
    "LocalRandomizer",
    "Mechanism",
    "MethodResult",
    "PrivacyGuarantee",
    "ScramblerMechanism",
    "account",
    "compose_parallel",
    "compose_sequential",
    "report_with_method",
]
