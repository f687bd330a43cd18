"""The ``dpcomm`` console script's front: ``--version`` and ``--help`` without the library.

Building the whole command line imports the accountant (scipy), the engines and DuckDB, about
a second and a half; the two questions a user asks first are answered here before any of that.
Everything else goes to :func:`dpcomm.cli.main.main`. The help text is the full parser's
(80 columns), checked equal by ``tests/integration/test_fast_start.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dpcomm import __version__

#: ``build_parser().format_help()`` at 80 columns (the test regenerates and compares it).
TOP_LEVEL_HELP = """\
usage: dpcomm [-h] [--version]
              {account,run,data,figures,audit,plan,headline,pki,deploy,node}
              ...

Differential privacy for data-dependent communication patterns.

positional arguments:
  {account,run,data,figures,audit,plan,headline,pki,deploy,node}
    account             (ε, δ) of a communication pattern under sampling,
                        flooding and scramblers
    run                 run a use case (Aggregate SQL, K-means) with
                        countermeasures in the simulator or on Dask
    data                datasets
    figures             regenerate the paper's figures (PNG + CSV + index
                        page)
    audit               statistical audit: empirical lower bound on ε vs the
                        accountant's upper bound
    plan                the cheapest countermeasure meeting (ε, δ) under
                        channel and consent limits
    headline            dummies needed for ε ≤ 1 in the paper's scenario, per
                        accounting method
    pki                 local certificate authority and per-node certificates
                        for mutual TLS
    deploy              run a round as a real deployment (processes, mutual
                        TLS 1.3)
    node                run one node of a deployment

options:
  -h, --help            show this help message and exit
  --version             show program's version number and exit
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpcomm`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        print(f"dpcomm {__version__}")
        return 0
    if args in (["--help"], ["-h"]):
        sys.stdout.write(TOP_LEVEL_HELP)
        return 0
    from dpcomm.cli.main import main as full

    return full(args)


if __name__ == "__main__":
    sys.exit(main())
