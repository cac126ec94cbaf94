"""Two editors on one file: the second to save is warned before it overwrites the
first one's save (the file changed on disk since it opened it)."""

from PySide6.QtWidgets import QMessageBox

from canopy.app.commands import edit_nodes
from canopy.app.main_window import MainWindow
from canopy.engine.io.topology_json import load_sample, load_topology, save_topology


def _editor(qtbot, path):
    win = MainWindow()
    qtbot.addWidget(win)
    assert win.open_path(path)
    return win


def test_the_second_save_is_warned_and_cancel_keeps_the_first(qtbot, tmp_path, dialogs):
    path = tmp_path / "shared.json"
    save_topology(load_sample(), path)
    first, second = _editor(qtbot, path), _editor(qtbot, path)
    edit_nodes(first.doc, ["ib0"], "label", "first")
    assert first.save() and not dialogs.calls
    edit_nodes(second.doc, ["ib0"], "label", "second")
    dialogs.answers["warning"] = QMessageBox.StandardButton.Cancel
    assert not second.save()
    kind, title, text = dialogs.calls[-1]
    assert (kind, title) == ("warning", "File changed on disk")
    assert "shared.json was changed on disk" in text
    assert load_topology(path).node("ib0").label == "first"
    assert second.doc.modified
    dialogs.answers["warning"] = QMessageBox.StandardButton.Save
    assert second.save()
    assert load_topology(path).node("ib0").label == "second"
    for win in (first, second):
        win.doc.undo_stack.setClean()


def test_own_saves_never_warn(qtbot, tmp_path, dialogs):
    path = tmp_path / "mine.json"
    save_topology(load_sample(), path)
    win = _editor(qtbot, path)
    for i in range(3):
        edit_nodes(win.doc, ["ib0"], "label", f"edit {i}")
        assert win.save()
    assert not dialogs.calls
