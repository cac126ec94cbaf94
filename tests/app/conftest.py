"""Fixtures for the editor's tests: isolated settings and recovery files, no blocking
dialogs, a shown window on the default sample, and helpers to drive the mouse."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QPointF, QSettings, Qt  # noqa: E402
from PySide6.QtGui import QMouseEvent  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox  # noqa: E402

from canopy.app.main_window import MainWindow  # noqa: E402
from canopy.engine.io.topology_json import DEFAULT_SAMPLE, load_sample  # noqa: E402


class Dialogs:
    """Stands in for QMessageBox/QFileDialog statics: records calls, returns set answers."""

    def __init__(self):
        self.calls: list[tuple[str, str, str]] = []
        self.answers: dict[str, object] = {
            "warning": QMessageBox.StandardButton.Cancel,
            "question": QMessageBox.StandardButton.No,
            "critical": QMessageBox.StandardButton.Ok,
        }
        self.open_path = ""
        self.save_path = ""

    def message(self, kind: str):
        def show(parent, title, text, *args, **kwargs):
            self.calls.append((kind, title, text))
            return self.answers.get(kind, QMessageBox.StandardButton.Ok)
        return show

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Settings and recovery files in tmp_path; every modal dialog replaced."""
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                      str(tmp_path / "settings"))
    monkeypatch.setenv("CANOPY_RECOVERY_DIR", str(tmp_path / "recovery"))
    dialogs = Dialogs()
    for kind in ("warning", "question", "critical", "information", "about"):
        monkeypatch.setattr(QMessageBox, kind, staticmethod(dialogs.message(kind)))
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (dialogs.open_path, "")))
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (dialogs.save_path, "")))
    return dialogs


@pytest.fixture
def dialogs(isolated) -> Dialogs:
    return isolated


@pytest.fixture
def window(qtbot):
    """The editor on the default sample (2 x DGX A100), shown at a fixed size."""
    win = MainWindow()
    win.doc.set_topology(load_sample(), None, display_name=DEFAULT_SAMPLE)
    qtbot.addWidget(win)
    win.resize(1200, 800)
    win.show()
    qtbot.waitExposed(win)
    win.view.reset_zoom()
    yield win
    win.doc.undo_stack.setClean()
    win.close()


class Mouse:
    """Presses, drags and clicks on the canvas at scene coordinates."""

    def __init__(self, window: MainWindow):
        self.view = window.view

    def show(self, *points: QPointF) -> None:
        """Centre the view on ``points`` so the events land inside the viewport."""
        self.view.centerOn(QPointF(sum(p.x() for p in points) / len(points),
                                   sum(p.y() for p in points) / len(points)))

    def _send(self, kind: QEvent.Type, scene_pos: QPointF, button: Qt.MouseButton,
              buttons: Qt.MouseButton, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
        local = QPointF(self.view.mapFromScene(scene_pos))
        glob = QPointF(self.view.viewport().mapToGlobal(local.toPoint()))
        event = QMouseEvent(kind, local, glob, button, buttons, modifiers)
        QApplication.sendEvent(self.view.viewport(), event)

    def press(self, pos: QPointF, button=Qt.MouseButton.LeftButton, modifiers=None) -> None:
        self._send(QEvent.Type.MouseButtonPress, pos, button, button,
                   modifiers or Qt.KeyboardModifier.NoModifier)

    def move(self, pos: QPointF, button=Qt.MouseButton.LeftButton) -> None:
        self._send(QEvent.Type.MouseMove, pos, Qt.MouseButton.NoButton, button)

    def release(self, pos: QPointF, button=Qt.MouseButton.LeftButton) -> None:
        self._send(QEvent.Type.MouseButtonRelease, pos, button, Qt.MouseButton.NoButton)

    def click(self, pos: QPointF, modifiers=None) -> None:
        self.press(pos, modifiers=modifiers)
        self.release(pos)

    def drag(self, start: QPointF, end: QPointF, steps: int = 5) -> None:
        self.press(start)
        for i in range(1, steps + 1):
            t = i / steps
            self.move(QPointF(start.x() + (end.x() - start.x()) * t,
                              start.y() + (end.y() - start.y()) * t))
        self.release(end)


@pytest.fixture
def mouse(window) -> Mouse:
    return Mouse(window)



@pytest.fixture(scope="session", autouse=True)
def empty_clipboard_at_exit(qapp):
    """Qt's offscreen clipboard crashes at interpreter exit if it still owns mime data
    that Python created; empty it while the application is alive."""
    yield
    QApplication.clipboard().clear()
    QApplication.processEvents()
