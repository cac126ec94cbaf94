"""Locate bundled resources (icons, style sheets) through importlib.resources.

Works from a source checkout, an installed wheel and the frozen (PyInstaller) app alike,
because nothing here builds paths relative to the source tree. Imports neither Qt nor the
engine.
"""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from importlib import resources
from pathlib import Path

ICON_SVG = "canopy.svg"
ICON_PNG = "canopy.png"

# Files extracted from a zipped install live until the interpreter exits.
_extracted = ExitStack()
atexit.register(_extracted.close)


def resource_path(name: str) -> Path:
    """A real filesystem path to the bundled resource ``name`` (Qt needs paths, not streams)."""
    ref = resources.files("canopy.resources").joinpath(name)
    if not ref.is_file():
        raise FileNotFoundError(f"Canopy resource {name!r} is not installed.")
    return _extracted.enter_context(resources.as_file(ref))


def icon_path(svg: bool = True) -> Path:
    """The application icon, as SVG (scalable, the default) or as the 256x256 PNG."""
    return resource_path(ICON_SVG if svg else ICON_PNG)
