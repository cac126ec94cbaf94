"""The main window's dock tab bars: only the ones Qt lays out stay shown.

QMainWindow gives each group of tabified docks a tab bar. Tabifying a group while the
window is hidden and another group already has a bar makes Qt (6.11) lay the window out
in the middle of creating the new bar, and that layout creates a bar for the same group
first: two bars then hold the group's docks, and Qt keeps the newer one. The older one
is never laid out, retitled or hidden again, so it stays shown where it first was, with
the titles its docks had then ("Validation (1) | Plots" over the Compare dock's title
at 1280x800). The window's docks are all tabified while it is being built, hidden.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMainWindow, QTabBar


def hide_stray_tab_bars(window: QMainWindow) -> int:
    """Hide every tab bar of ``window``'s dock groups that a newer one holds a dock of
    (Qt's tab data names each tab's dock), and return how many were shown."""
    bars = [b for b in window.findChildren(QTabBar) if b.parent() is window]
    held: set[object] = set()
    hidden = 0
    for bar in reversed(bars):              # children in creation order: newest first here
        docks = {bar.tabData(i) for i in range(bar.count())}
        if docks & held:
            hidden += not bar.isHidden()
            bar.hide()
        held |= docks
    return hidden
