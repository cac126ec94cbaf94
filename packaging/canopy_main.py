"""Entry script of the frozen Canopy app: the same ``canopy`` command the wheel installs."""

import multiprocessing
import sys

from canopy.cli import main

if __name__ == "__main__":
    # Engine jobs run in child processes (canopy.engine.process.child_jobs); a frozen app starts
    # them
    # by running this executable again, which freeze_support() turns into the child.
    multiprocessing.freeze_support()
    sys.exit(main())
