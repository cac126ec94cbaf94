"""Unexpected exceptions in the editor: a dialog with one sentence, the traceback in the log.

Qt calls Python slots from its event loop; an exception escaping one would otherwise be
printed as a traceback on the terminal and the edit silently lost. The hook writes it to
Canopy's log file (:mod:`canopy.engine.process.internal_errors`) and tells the user where, once per
burst.
"""

from __future__ import annotations

import sys
from types import TracebackType

from PySide6.QtWidgets import QMessageBox, QWidget

from canopy.app.memory_watch import MemoryBudgetExceeded
from canopy.engine.process.internal_errors import report_internal_error


def install_error_hook(window: QWidget) -> None:
    """Route uncaught exceptions to the log file and a dialog over ``window``."""
    showing = [False]

    def hook(kind: type[BaseException], error: BaseException,
             tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, error, tb)
            return
        if issubclass(kind, MemoryBudgetExceeded):
            if not showing[0]:
                showing[0] = True
                try:
                    QMessageBox.warning(window, "Canopy: memory", str(error))
                finally:
                    showing[0] = False
            return
        message = report_internal_error("the editor", error.with_traceback(tb))
        if showing[0]:
            return
        showing[0] = True
        try:
            QMessageBox.critical(window, "Canopy: internal error", message)
        finally:
            showing[0] = False

    sys.excepthook = hook
