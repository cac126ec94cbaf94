"""``python -m app.cli``: the same as the ``canopy`` command."""

import sys

from app.cli import main

sys.exit(main())
