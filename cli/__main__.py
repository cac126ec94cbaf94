"""``python -m canopy.cli``: the same as the ``canopy`` command."""

from canopy.cli import run

run()
