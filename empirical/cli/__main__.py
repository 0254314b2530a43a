"""``python -m empirical.cli`` (and ``torchrun -m empirical.cli``): the ``normsat`` command."""

import sys

from empirical.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
