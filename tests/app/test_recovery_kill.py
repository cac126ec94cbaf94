"""No lost edits: a real editor process, killed with SIGKILL two seconds after an edit,
leaves a recovery file that the next start offers back."""

import os
import signal
import subprocess
import sys
import time

from PySide6.QtWidgets import QMessageBox

from canopy.app import recovery
from canopy.app.commands import edit_nodes
from canopy.app.main_window import MainWindow

EDITOR = """
import os
from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication
app = QApplication([])
QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, os.environ["SETTINGS"])
from canopy.app.commands import edit_nodes
from canopy.app.main_window import MainWindow
from canopy.engine.io.topology_json import load_sample
window = MainWindow()
window.doc.set_topology(load_sample(), None, display_name="sample.json")
window.show()

def edit():
    edit_nodes(window.doc, ["ib0"], "label", "edited just before the kill")
    print("EDITED", flush=True)

QTimer.singleShot(100, edit)
app.exec()
"""


def test_kill_9_two_seconds_after_an_edit_loses_nothing(qtbot, tmp_path, dialogs):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", SETTINGS=str(tmp_path / "settings"))
    proc = subprocess.Popen([sys.executable, "-c", EDITOR], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "EDITED"
        time.sleep(2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    found = recovery.orphaned()
    assert len(found) == 1 and found[0].display_name == "sample.json"

    again = MainWindow()
    qtbot.addWidget(again)
    dialogs.answers["question"] = QMessageBox.StandardButton.Yes
    assert again.offer_recovery()
    assert again.doc.node("ib0").label == "edited just before the kill"
    assert again.isWindowModified()


def test_a_burst_of_edits_is_written_once_within_the_debounce(window, qtbot):
    saver = window.autosaver
    for i in range(5):
        edit_nodes(window.doc, ["ib0"], "label", f"burst {i}")
    assert saver.debounce.isActive() and not saver.file.exists()
    qtbot.waitUntil(saver.file.exists, timeout=recovery.DEBOUNCE_MS + 3000)
    assert "burst 4" in saver.file.read_text()
