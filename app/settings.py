"""Persistent preferences (recent files) in QSettings.

The settings are INI files under Qt's user configuration directory; tests point
``QSettings.setPath`` at a temporary directory to keep the user's list untouched.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

MAX_RECENT = 10


def settings() -> QSettings:
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "Canopy", "Canopy")


def recent_files() -> list[Path]:
    """The list as stored: QSettings reads a one-file list from an INI file back as a
    bare string, and an emptied one as nothing."""
    value = settings().value("recent_files", [])
    if isinstance(value, str):
        return [Path(value)]
    if isinstance(value, list):
        return [Path(p) for p in value]
    return []


def add_recent_file(path: Path) -> list[Path]:
    """Put ``path`` first in the recent list (without duplicates); return the new list."""
    path = Path(path).resolve()
    files = [path] + [p for p in recent_files() if p != path]
    files = files[:MAX_RECENT]
    store = settings()
    store.setValue("recent_files", [str(p) for p in files])
    store.sync()
    return files


def clear_recent_files() -> None:
    store = settings()
    store.setValue("recent_files", [])
    store.sync()
