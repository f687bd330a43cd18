"""``python -m dpcomm``: the ``dpcomm`` command."""

import sys

from dpcomm.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
