"""``python -m diffmbs``: the command-line interface, see :mod:`diffmbs.cli`."""

import sys

from diffmbs.cli import main

sys.exit(main())
