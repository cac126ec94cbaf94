"""Canopy's tests: ``tests/engine`` mirrors the engine's packages, ``tests/app`` the editor,
``tests/cli`` the command line; the files at this level check the whole project."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared"
