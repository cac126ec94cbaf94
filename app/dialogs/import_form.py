"""The frame every File ▸ Import dialog shares: a file field with Browse…, the dialog's
own form, a line naming what is missing or wrong, and Import / Cancel.

:class:`ImportForm` builds it on a :class:`QDialog`; the dialog fills the form, says
what is wrong with :meth:`ImportForm.show_problem` (Import stays disabled until nothing
is), and runs the import in its ``accept``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

ERROR_STYLE = "color: #8a1c12;"


def browse_row(edit: QLineEdit, browse: Callable[[], object]) -> QHBoxLayout:
    """``edit`` with a Browse… button beside it that calls ``browse``."""
    button = QPushButton("Browse…")
    button.clicked.connect(browse)
    row = QHBoxLayout()
    row.addWidget(edit, 1)
    row.addWidget(button)
    return row


def choose_file(dialog: QDialog, edit: QLineEdit, title: str, filters: str,
                near: QLineEdit | None = None) -> None:
    """Ask for a file to open, starting in the folder of ``near`` (default ``edit``), and
    put the choice in ``edit``."""
    start = str(Path((near or edit).text()).parent)
    path, _ = QFileDialog.getOpenFileName(dialog, title, start, filters)
    if path:
        edit.setText(path)


class ImportForm:
    """The form, problem line and Import / Cancel buttons of an import dialog."""

    def __init__(self, dialog: QDialog):
        self.form = QFormLayout()
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(ERROR_STYLE)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Import")
        self.buttons.accepted.connect(dialog.accept)
        self.buttons.rejected.connect(dialog.reject)
        layout = QVBoxLayout(dialog)
        layout.addLayout(self.form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)

    def show_problem(self, problem: str | None) -> None:
        """Say what keeps the import from running (None: nothing, Import enabled)."""
        self.error.setText(problem or "")
        self.error.setVisible(problem is not None)
        self.ok.setEnabled(problem is None)
