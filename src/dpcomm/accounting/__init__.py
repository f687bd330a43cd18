"""Layer 1: the privacy accountant for communication patterns (pure mathematics, no I/O).

One module per family of bounds; [`account`][] dispatches a mechanism to every method
that applies and reports the smallest valid bound beside each method's own value. Names are
imported on first use, so that a submodule can be imported without the accountant (scipy).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.accounting.accountant import (
        METHOD_DESCRIPTIONS as METHOD_DESCRIPTIONS,
        AccountingReport as AccountingReport,
        MethodResult as MethodResult,
        account as account,
        report_with_method as report_with_method,
    )
    from dpcomm.accounting.defaults import (
        DEFAULT_MONTE_CARLO_SAMPLES as DEFAULT_MONTE_CARLO_SAMPLES,
        MAX_ROUNDS as MAX_ROUNDS,
        METHOD_NAMES as METHOD_NAMES,
    )
    from dpcomm.accounting.guarantee import (
        PrivacyGuarantee as PrivacyGuarantee,
        compose_parallel as compose_parallel,
        compose_sequential as compose_sequential,
    )
    from dpcomm.accounting.mechanisms import (
        GenericLocalRandomizer as GenericLocalRandomizer,
        GenericScrambler as GenericScrambler,
        LocalRandomizer as LocalRandomizer,
        Mechanism as Mechanism,
        ScramblerMechanism as ScramblerMechanism,
    )

__getattr__, __dir__ = attach(__name__, __file__)
