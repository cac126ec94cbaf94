"""Entry script of the frozen Canopy app: the same ``canopy`` command the wheel installs."""

import multiprocessing

from canopy.cli import run

if __name__ == "__main__":
    # Engine jobs run in child processes (canopy.engine.process.child_jobs); a frozen app starts
    # them
    # by running this executable again, which freeze_support() turns into the child.
    multiprocessing.freeze_support()
    run()
