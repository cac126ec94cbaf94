"""The card's top-level folders install under the ``canopy`` namespace, and nothing else.

A package folder missing from pyproject's explicit list would be left out of the wheel
and of editable installs; a bare ``import engine`` would work only from a checkout.
"""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"engine": "canopy.engine", "app": "canopy.app", "cli": "canopy.cli",
           "samples": "canopy.samples", "resources": "canopy.resources"}


def _configured():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_folder_is_installed_under_canopy():
    config = _configured()
    assert config["package-dir"] == {name: folder for folder, name in FOLDERS.items()}
    found = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found == set(config["packages"])


def test_no_bare_top_level_imports():
    bare = re.compile(r"^\s*(from|import)\s+(engine|app|cli|samples|resources)\b", re.M)
    offenders = [str(p.relative_to(ROOT)) for folder in (*FOLDERS, "tests", "bench")
                 for p in (ROOT / folder).rglob("*.py") if bare.search(p.read_text())]
    assert offenders == []
