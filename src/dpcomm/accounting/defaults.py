"""The accountant's method names and limits, in a module that imports nothing.

The accountant (`dpcomm.accounting.accountant`, which imports scipy) and the command's parser
(`dpcomm.cli`, which must build without numpy or scipy) both read them from here.
"""

from __future__ import annotations

#: Every method name, in the order reports list them.
METHOD_NAMES: tuple[str, ...] = (
    "theorem-1",
    "exact",
    "post-processing",
    "hoeffding",
    "bennett",
    "monte-carlo",
    "monte-carlo-upper",
    "enumeration",
    "theorem-exact",
    "bennett-printed",
    "pld",
)
#: Most rounds ``account`` composes (beyond, the PLD's FFT grid grows past memory).
MAX_ROUNDS = 10_000
#: Algorithm 2's R when its estimate is asked for by name without a sample count
#: (``dpcomm account --method monte-carlo``); the paper's value.
DEFAULT_MONTE_CARLO_SAMPLES = 5000
