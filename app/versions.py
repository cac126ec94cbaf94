"""Versions of Canopy and the libraries it stands on (for --version and About)."""

from __future__ import annotations

from importlib import metadata

LIBRARIES = ["PySide6-Essentials", "networkx", "numpy", "scipy", "lxml", "pyqtgraph", "ortools"]


def canopy_version() -> str:
    try:
        return metadata.version("canopy-collectives")
    except metadata.PackageNotFoundError:
        return "unknown"


def library_versions() -> dict[str, str]:
    """Installed versions, without importing Qt (so the CLI stays fast)."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def version_report() -> str:
    lines = [f"canopy {canopy_version()}"]
    lines += [f"  {name} {ver}" for name, ver in library_versions().items()]
    lines.append("  maxflow backend: OR-Tools SimpleMaxFlow (int64, exact)")
    return "\n".join(lines)
