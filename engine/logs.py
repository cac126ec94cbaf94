"""Canopy's log file: where internal errors leave their tracebacks.

People see one sentence; the traceback of an internal error (a bug in Canopy) goes to
the log file, never to the terminal or a dialog. The file is
``$CANOPY_LOG_DIR/canopy.log`` when that variable is set, else
``$XDG_STATE_HOME/canopy/canopy.log`` (``~/.local/state/canopy/canopy.log``). The
command line and the editor call :func:`log_internal_error`; modules log through
``logging.getLogger(__name__)`` under the ``canopy`` logger.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

LOGGER = logging.getLogger("canopy")
_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"


def log_path() -> Path:
    """The log file's path (its folder is created when the first record is written)."""
    env = os.environ.get("CANOPY_LOG_DIR")
    if env:
        return Path(env) / "canopy.log"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "canopy" / "canopy.log"


def _file_handler() -> logging.Handler | None:
    path = log_path()
    for handler in LOGGER.handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename) == path:
            return handler
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    return handler


def log_internal_error(context: str, error: BaseException) -> str:
    """Write ``error`` with its traceback to the log; return one sentence for people.

    The sentence names the error's type and where the traceback is, so a bug report can
    carry it; when the log cannot be written, it says so instead.
    """
    handler = _file_handler()
    summary = f"{error.__class__.__name__}: {error}".strip().rstrip(":")
    if len(summary) > 200:
        summary = summary[:200] + "…"
    if handler is None:
        return (f"internal error in {context} ({summary}); the log file {log_path()} could "
                "not be written.")
    LOGGER.error("internal error in %s", context, exc_info=error)
    handler.flush()
    return (f"internal error in {context} ({summary}); this is a bug in Canopy, the "
            f"traceback is in {log_path()}.")
