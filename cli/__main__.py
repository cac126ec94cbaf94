"""``python -m canopy.cli``: the same as the ``canopy`` command."""

import sys

from canopy.cli import main

sys.exit(main())
