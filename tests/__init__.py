"""Canopy's tests: ``tests/engine`` mirrors the engine's packages, ``tests/app`` the editor,
``tests/cli`` the command line; the files at this level check the whole project."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
# ../shared beside the checkout; CANOPY_SHARED_DIR moves it (.ci/run hides it this way),
# and tests/shared_data.py skips the tests that need it when it is absent
SHARED = Path(os.environ.get("CANOPY_SHARED_DIR", ROOT.parent / "shared"))
