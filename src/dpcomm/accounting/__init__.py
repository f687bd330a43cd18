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
    )
    from dpcomm.accounting.accountant import (
        AccountingReport as AccountingReport,
    )
    from dpcomm.accounting.accountant import (
        MethodResult as MethodResult,
    )
    from dpcomm.accounting.accountant import (
        account as account,
    )
    from dpcomm.accounting.accountant import (
        report_with_method as report_with_method,
    )
    from dpcomm.accounting.defaults import (
        DEFAULT_MONTE_CARLO_SAMPLES as DEFAULT_MONTE_CARLO_SAMPLES,
    )
    from dpcomm.accounting.defaults import (
        MAX_ROUNDS as MAX_ROUNDS,
    )
    from dpcomm.accounting.defaults import (
        METHOD_NAMES as METHOD_NAMES,
    )
    from dpcomm.accounting.guarantee import (
        PrivacyGuarantee as PrivacyGuarantee,
    )
    from dpcomm.accounting.guarantee import (
        compose_parallel as compose_parallel,
    )
    from dpcomm.accounting.guarantee import (
        compose_sequential as compose_sequential,
    )
    from dpcomm.accounting.mechanisms import (
        GenericLocalRandomizer as GenericLocalRandomizer,
    )
    from dpcomm.accounting.mechanisms import (
        GenericScrambler as GenericScrambler,
    )
    from dpcomm.accounting.mechanisms import (
        LocalRandomizer as LocalRandomizer,
    )
    from dpcomm.accounting.mechanisms import (
        Mechanism as Mechanism,
    )
    from dpcomm.accounting.mechanisms import (
        ScramblerMechanism as ScramblerMechanism,
    )

__getattr__, __dir__ = attach(__name__, __file__)
