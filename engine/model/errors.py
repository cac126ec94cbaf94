"""Errors the engine reports to people: each carries one clear sentence."""

from __future__ import annotations

import os


class CanopyError(Exception):
    """Base class: ``str(error)`` is one sentence naming the file, node or link at fault."""


class TopologyError(CanopyError):
    """A topology file or model that cannot be used (bad JSON, bad link, unbalanced node...)."""


class ScheduleError(CanopyError):
    """A schedule that fails verification or cannot be built for the requested options."""



MAX_SENTENCE = 600
"""Characters of an error sentence shown; the rest (a long value quoted) is cut."""


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks, tabs and other control characters
    that a file's values can carry into a sentence are shown escaped, and a sentence
    quoting a very long value is cut to :data:`MAX_SENTENCE` characters.

    """
    shown = "".join(ch if ch.isprintable() or ch == " " else
                    repr(ch)[1:-1] for ch in text)
    return shown if len(shown) <= MAX_SENTENCE else shown[:MAX_SENTENCE - 1] + "…"
def unreadable(path: str | os.PathLike[str], exc: Exception) -> str:
    """One sentence saying why the file at ``path`` could not be read, the same for every
    kind of file (a folder, no permission, not UTF-8 text)."""
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a folder, not a file."
    if isinstance(exc, PermissionError):
        return f"{path} cannot be read (permission denied)."
    if isinstance(exc, UnicodeDecodeError):
        return f"{path} is not UTF-8 text."
    reason = getattr(exc, "strerror", None) or exc.__class__.__name__
    return f"{path} cannot be read ({reason})."


def unwritable(path: str | os.PathLike[str], exc: OSError | None = None) -> str:
    """One sentence saying why ``path`` could not be written, naming the path asked for
    (never the temporary file an atomic save writes first)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"{path} cannot be written: the folder {parent} does not exist."
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a folder; give a file name to write."
    if isinstance(exc, PermissionError):
        return f"{path} cannot be written (permission denied)."
    reason = (exc.strerror if exc is not None else None) or "an error"
    return f"{path} cannot be written ({reason})."
