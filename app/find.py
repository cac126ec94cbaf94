"""Edit ▸ Find (Ctrl+F): a bar over the canvas that finds nodes and links by name.

Typing ``gpu3`` finds every node whose id or label contains it; ``n0.gpu3 nvswitch`` (two
words, or ``a-b``, ``a→b``) finds the links joining a node matching the first word to one
matching the second. Enter selects the next match and centres the canvas on it; the
count says which match of how many is shown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QLabel, QLineEdit, QToolBar, QToolButton

if TYPE_CHECKING:
    from canopy.app.main_window import MainWindow

Match = tuple[Literal["node"], str] | tuple[Literal["link"], int]
"""A node by id or a link by key."""

SEPARATORS = re.compile(r"\s*(?:→|->|<->|⟷|—|-{1,2}(?=\s)|\s)\s*")


def find_matches(window: MainWindow, query: str) -> list[Match]:
    """("node", id) and ("link", key) matches of ``query``, nodes first, in file order."""
    query = query.strip().lower()
    if not query:
        return []
    doc = window.doc
    names = {n.id: f"{n.id} {n.label or ''}".lower() for n in doc.topology.nodes}
    parts = [p for p in SEPARATORS.split(query) if p]
    matches: list[Match] = []
    if len(parts) == 1:
        matches += [("node", n) for n, text in names.items() if query in text]
    if len(parts) == 2:
        a, b = parts
        for key in doc.link_keys():
            link = doc.link(key)
            s, t = names.get(link.source, ""), names.get(link.target, "")
            if (a in s and b in t) or (a in t and b in s):
                matches.append(("link", key))
    return matches


class FindBar(QToolBar):
    """The find bar: a search field, the match count, previous/next and close buttons."""

    def __init__(self, window: MainWindow):
        super().__init__("Find", window)
        self.setObjectName("FindToolBar")
        self.window_ = window
        self.setMovable(False)
        self.addWidget(QLabel(" Find: "))
        self.field = QLineEdit()
        self.field.setPlaceholderText("node name, or two names for a link (n0.gpu0 nvswitch)")
        self.field.setMinimumWidth(320)
        self.field.setClearButtonEnabled(True)
        self.field.textChanged.connect(self._changed)
        self.field.returnPressed.connect(lambda: self.step(1))
        self.addWidget(self.field)
        self.count = QLabel("")
        self.count.setMinimumWidth(90)
        self.addWidget(self.count)
        for text, delta, tip in (("◀", -1, "Previous match (Shift+Enter)"),
                                 ("▶", 1, "Next match (Enter)")):
            button = QToolButton()
            button.setText(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _=False, d=delta: self.step(d))
            self.addWidget(button)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Close the find bar (Esc)")
        close.clicked.connect(self.close_bar)
        self.addWidget(close)
        QShortcut(QKeySequence("Esc"), self.field, self.close_bar)
        QShortcut(QKeySequence("Shift+Return"), self.field, lambda: self.step(-1))
        self.matches: list[Match] = []
        self.position = -1
        window.doc.edited.connect(self._document_edited)
        self.hide()

    def _document_edited(self) -> None:
        """An edit (a delete, an undo) may have taken matched nodes or links away: the
        next step finds again in the document as it is."""
        self.matches = []

    def open_bar(self) -> None:
        self.show()
        self.field.setFocus()
        self.field.selectAll()

    def close_bar(self) -> None:
        self.hide()
        self.window_.view.setFocus()

    def search(self, query: str) -> int:
        """Find ``query`` and show the first match; the number of matches."""
        self.field.setText(query)
        return len(self.matches)

    def _changed(self, text: str) -> None:
        self.matches = find_matches(self.window_, text)
        self.position = -1
        if self.matches:
            self.step(1)
        else:
            self.count.setText("no match" if text.strip() else "")

    def step(self, delta: int) -> None:
        """Select and centre the next (or previous) match."""
        if not self.matches:
            self.matches = find_matches(self.window_, self.field.text())
            if not self.matches:
                return
        self.position = (self.position + delta) % len(self.matches)
        match = self.matches[self.position]
        nodes, links = ([match[1]], []) if match[0] == "node" else ([], [match[1]])
        window = self.window_
        window.scene.select(nodes, links)
        rect = window.scene.items_rect(nodes, links)
        visible = window.view.mapToScene(window.view.viewport().rect()).boundingRect()
        if rect.width() > visible.width() or rect.height() > visible.height():
            window.view.zoom_to_fit(rect)
        else:
            window.view.centerOn(rect.center())
        self.count.setText(f"{self.position + 1} of {len(self.matches)}")
        self.count.setAlignment(Qt.AlignmentFlag.AlignCenter)
