"""``python -m mlip``: the ``mlip`` command line (see :mod:`mlip.cli`)."""

import sys

from mlip.cli import main

if __name__ == "__main__":
    sys.exit(main())
