"""The line at the top of every result dock: no results yet, stale results, or nothing."""

from __future__ import annotations

from PySide6.QtWidgets import QDockWidget, QLabel, QVBoxLayout, QWidget

EMPTY_TEXT = "No results yet: choose Compute ▸ Solve (F5)."
STALE_TEXT = ("Stale: the topology was edited after this solve, so these results describe "
              "the earlier topology. Solve again (F5) to update them.")
PENDING_TEXT = "Building the schedule… (the optimum is in the Results dock)."
EMPTY_STYLE = "QLabel { color: #4b5668; padding: 6px; }"
STALE_STYLE = ("QLabel { background: #fff3c4; color: #6b4e00; border: 1px solid #e0c060; "
               "border-radius: 4px; padding: 6px; }")


class ResultBanner(QLabel):
    """Explains why a result dock is empty or greyed out; hidden when results are fresh."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(EMPTY_TEXT, parent)
        self.setWordWrap(True)
        self.setStyleSheet(EMPTY_STYLE)
        self.state = "empty"

    def set_state(self, has_results: bool, stale: bool, pending: bool = False) -> None:
        if not has_results:
            self.state = "pending" if pending else "empty"
            self._say(PENDING_TEXT if pending else EMPTY_TEXT, EMPTY_STYLE)
        elif stale:
            self.state = "stale"
            self._say(STALE_TEXT, STALE_STYLE)
        else:
            self.state = "fresh"
        self.setVisible(self.state != "fresh")

    def _say(self, text: str, style: str) -> None:
        """Text and style, each set only if it changed: setting a style sheet restyles the
        label even when it is the same (six banners would add to the turn in which a large
        bound arrives)."""
        if self.text() != text:
            self.setText(text)
        if self.styleSheet() != style:
            self.setStyleSheet(style)


def dock_title(dock: QDockWidget, title: str, has_results: bool, stale: bool) -> None:
    """``title``, or ``title — stale (topology edited)`` for stale results."""
    dock.setWindowTitle(f"{title} — stale (topology edited)" if has_results and stale
                        else title)


class SolutionDock(QDockWidget):
    """A dock showing the current solution: the banner on top, then ``self.body``.

    Subclasses build ``self.body`` inside ``self.content`` (a widget whose layout
    already holds the banner) and keep ``self.solution``; stale results hide nothing
    but grey out the body when ``disable_when_stale``.
    """

    disable_when_stale = True

    def __init__(self, title: str, object_name: str, parent: QWidget | None = None):
        super().__init__(title, parent)
        self.title = title
        self.setObjectName(object_name)
        self.solution: object | None = None
        self.stale = False
        self.pending = False
        self.content = QWidget()
        self.content_layout = QVBoxLayout(self.content)
        self.content_layout.setContentsMargins(6, 6, 6, 6)
        self.banner = ResultBanner()
        self.content_layout.addWidget(self.banner)
        self.body: QWidget = QWidget()

    def set_pending(self, pending: bool) -> None:
        """Say that a schedule is being built (its optimum is already shown)."""
        self.pending = pending
        self.set_stale(self.stale)

    def has_results(self) -> bool:
        return self.solution is not None

    def set_stale(self, stale: bool) -> None:
        self.stale = stale
        has = self.has_results()
        self.banner.set_state(has, stale, self.pending)
        self.body.setVisible(has)
        if self.disable_when_stale:
            self.body.setEnabled(has and not stale)
        dock_title(self, self.title, has, stale)
