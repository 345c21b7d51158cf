"""``python -m ptxforge``: the ``ptxforge`` command (see :mod:`ptxforge.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
