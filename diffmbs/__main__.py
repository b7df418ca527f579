"""``python -m diffmbs``: the command-line interface, see :mod:`diffmbs.app.cli`."""

import sys

from diffmbs.app.cli import main

sys.exit(main())
