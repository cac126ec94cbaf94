"""Entry script of the frozen Canopy app: the same ``canopy`` command the wheel installs."""

import sys

from canopy.cli import main

if __name__ == "__main__":
    sys.exit(main())
