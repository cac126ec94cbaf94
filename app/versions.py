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
    from canopy.engine.network.maxflow import default_backend

    lines.append(f"  maxflow backend: {default_backend()} "
                 "(exact; see canopy.engine.network.maxflow)")
    return "\n".join(lines)
