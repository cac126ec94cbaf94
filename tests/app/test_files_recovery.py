"""Files: save/load round trips, title, unsaved-changes prompt, recent files, bad files,
autosave and recovery after a crash."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox

from canopy.app import recovery, settings
from canopy.app.commands import edit_nodes
from canopy.app.main_window import MainWindow
from canopy.engine.io.topology_json import load_sample, load_topology, sample_names, save_topology

UNKNOWN = {
    "format": "canopy-topology", "version": 1, "name": "custom", "owner": "lab-7",
    "nodes": [
        {"id": "a", "kind": "compute", "rack": 3},
        {"id": "b", "kind": "compute", "x": 10, "y": 20},
        {"id": "s", "kind": "switch", "vendor": {"name": "acme", "ports": [1, 2]}},
    ],
    "links": [
        {"source": "a", "target": "s", "bandwidth": "12.5", "cable": "AOC"},
        {"source": "b", "target": "s", "bandwidth": 12.5, "latency": 0.3},
    ],
}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_save_load_round_trip_keeps_unknown_keys(window, tmp_path, dialogs):
    src = write(tmp_path / "in.json", UNKNOWN)
    assert window.open_path(src)
    doc = window.doc
    assert doc.node("a").x is not None, "nodes without coordinates are laid out"
    assert doc.node("b").x == 10
    edit_nodes(doc, ["a"], "label", "first GPU")
    assert window.isWindowModified() and "in.json" in window.windowTitle()
    dialogs.save_path = str(tmp_path / "out")
    assert window.save_as()
    out = tmp_path / "out.json"
    assert not window.isWindowModified() and "out.json" in window.windowTitle()
    data = json.loads(out.read_text())
    assert data["owner"] == "lab-7"
    nodes = {n["id"]: n for n in data["nodes"]}
    assert nodes["a"]["rack"] == 3 and nodes["a"]["label"] == "first GPU"
    assert nodes["s"]["vendor"] == {"name": "acme", "ports": [1, 2]}
    assert data["links"][0]["cable"] == "AOC" and data["links"][0]["bandwidth"] == "12.5"
    assert data["links"][1]["latency"] == "0.3"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    again = load_topology(out)
    assert again.links == load_topology(src).links
    assert settings.recent_files()[0] == out.resolve()


def test_failed_save_keeps_the_old_file_and_reports(window, tmp_path, dialogs, monkeypatch):
    target = write(tmp_path / "keep.json", UNKNOWN)
    window.open_path(target)
    edit_nodes(window.doc, ["a"], "label", "changed")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", broken_replace)
    assert not window.save()
    assert dialogs.kinds() == ["critical"] and "No space left" in dialogs.calls[0][2]
    assert json.loads(target.read_text()) == UNKNOWN
    assert window.isWindowModified()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_opening_removes_what_killed_saves_left_beside_the_file(window, tmp_path, dialogs):
    """A save killed mid-write leaves ``.NAME.PID.xxxx.tmp``; opening the file in the
    editor removes those of writers that are gone, never a live writer's."""
    target = write(tmp_path / "kept.json", UNKNOWN)
    dead = tmp_path / ".kept.json.999999999.x1.tmp"
    live = tmp_path / f".kept.json.{os.getppid()}.x2.tmp"
    dead.write_text("half")
    live.write_text("half")
    assert window.open_path(target)
    assert not dead.exists() and live.exists()


def test_bad_file_shows_engine_sentence_and_keeps_document(window, tmp_path, dialogs):
    bad = write(tmp_path / "bad.json", {**UNKNOWN, "links": [
        {"source": "a", "target": "s", "bandwidth": -4}]})
    names_before = window.doc.node_ids()
    assert not window.open_path(bad)
    kind, title, text = dialogs.calls[-1]
    assert kind == "critical"
    assert text == f"{bad}: link 0 (a - s) has bandwidth -4, which must be positive."
    assert window.doc.node_ids() == names_before
    assert not window.open_path(write(tmp_path / "junk.json", "{not json"))
    assert "is not valid JSON" in dialogs.calls[-1][2]


def test_a_large_file_opens_over_turns_of_the_event_loop(window, tmp_path, dialogs):
    """Reading a large file, laying it out and setting the document each take turns of
    their own (the window paints in between); open_path returns once it is open, and a
    second File > Open meanwhile is refused with a word in the status bar."""
    from bench.clusters import dgx_a100_cluster

    path = tmp_path / "large.json"
    save_topology(dgx_a100_cluster(16), path)
    seen, again = [], []
    ticker = QTimer()
    ticker.setInterval(0)
    ticker.timeout.connect(lambda: seen.append(window.doc.path))
    ticker.start()
    QTimer.singleShot(0, lambda: again.append(window.open_path(path)))
    assert window.open_path(path)
    ticker.stop()
    assert window.doc.path == path and len(window.doc.topology.compute_nodes()) == 128
    assert window.doc.node("n0.gpu0").x is not None, "laid out on the way"
    assert len(seen) >= 3 and path not in seen, "the loop ran while the file was read"
    assert again == [False] and "still being opened" in window.statusBar().currentMessage()
    assert not dialogs.calls


def test_unsaved_changes_prompt_on_close_and_open(window, tmp_path, dialogs):
    edit_nodes(window.doc, ["ib0"], "label", "spine")
    dialogs.answers["warning"] = QMessageBox.StandardButton.Cancel
    window.close()
    assert window.isVisible(), "Cancel keeps the window open"
    assert not window.open_path(write(tmp_path / "x.json", UNKNOWN))
    assert window.doc.has_node("ib0")
    dialogs.answers["warning"] = QMessageBox.StandardButton.Save
    dialogs.save_path = str(tmp_path / "saved.json")
    assert window.open_path(tmp_path / "x.json")
    assert load_topology(tmp_path / "saved.json").node("ib0").label == "spine"
    edit_nodes(window.doc, ["a"], "label", "z")
    dialogs.answers["warning"] = QMessageBox.StandardButton.Discard
    window.close()
    assert not window.isVisible()
    assert [c[0] for c in dialogs.calls] == ["warning"] * 4


def test_new_and_samples_and_recent_menu(window, tmp_path):
    window.new_document()
    assert window.doc.topology.nodes == [] and window.windowTitle().startswith("untitled")
    titles = [a.text() for a in window.menus["samples"].actions()]
    assert titles == sample_names()
    assert window.open_sample("mi250-2x16.json")
    assert len(window.doc.topology.compute_nodes()) == 32
    assert window.doc.path is None and window.windowTitle().startswith("mi250-2x16.json")
    path = write(tmp_path / "r.json", UNKNOWN)
    window.open_path(path)
    window.menus["recent"].aboutToShow.emit()
    assert window.menus["recent"].actions()[0].text() == str(path.resolve())


def test_autosave_writes_only_unsaved_changes_and_save_removes_it(window, tmp_path):
    saver = window.autosaver
    assert not saver.write_if_modified() and not saver.file.exists()
    edit_nodes(window.doc, ["ib0"], "label", "spine")
    assert saver.timer.interval() == 30_000 and saver.timer.isActive()
    assert saver.write_if_modified() and saver.file.exists()
    assert saver.file.parent == Path(os.environ["CANOPY_RECOVERY_DIR"])
    assert recovery.orphaned() == [], "a live session's file is not offered"
    window.doc.undo_stack.undo()
    assert not saver.file.exists(), "back to the saved state: nothing to recover"


def test_autosave_failure_is_reported_not_raised(window, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    window.autosaver.file = blocker / "x.recovery.json"
    edit_nodes(window.doc, ["ib0"], "label", "spine")
    assert not window.autosaver.write_if_modified()
    assert "Autosave to" in window.statusBar().currentMessage()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def crash(window) -> Path:
    """Leave the window's recovery file behind as a crashed process would."""
    window.autosaver.write_if_modified()
    crashed = window.autosaver.file.with_name(
        f"{dead_pid()}-{window.autosaver.file.name.split('-', 1)[1]}")
    window.autosaver.file.rename(crashed)
    return crashed


def test_recovery_after_crash_restores_unsaved_changes(qtbot, tmp_path, dialogs):
    path = write(tmp_path / "work.json", UNKNOWN)
    first = MainWindow()
    qtbot.addWidget(first)
    first.open_path(path)
    edit_nodes(first.doc, ["a"], "label", "unsaved label")
    leftover = crash(first)
    first.doc.undo_stack.setClean()

    second = MainWindow()
    qtbot.addWidget(second)
    dialogs.answers["question"] = QMessageBox.StandardButton.Yes
    assert second.offer_recovery()
    assert "did not shut down normally" in dialogs.calls[-1][2]
    assert str(path) in dialogs.calls[-1][2]
    assert second.doc.node("a").label == "unsaved label"
    assert second.doc.path == path and second.isWindowModified()
    assert not leftover.exists()
    second.doc.undo_stack.undo()
    assert second.doc.node("a").label == "", "undo goes back to the file on disk"
    assert not second.isWindowModified()
    second.doc.undo_stack.redo()
    assert second.doc.node("a").label == "unsaved label"
    assert not second.offer_recovery(), "offered once"


def test_declined_recovery_is_discarded(qtbot, window, dialogs):
    edit_nodes(window.doc, ["ib0"], "label", "spine")
    leftover = crash(window)
    dialogs.answers["question"] = QMessageBox.StandardButton.No
    other = MainWindow(load_sample())
    qtbot.addWidget(other)
    assert not other.offer_recovery()
    assert "“dgx-a100-2x8.json”" in dialogs.calls[-1][2]
    assert not leftover.exists()
    assert other.doc.node("ib0").label == "ib0"


def test_recovered_sample_undoes_to_the_sample(qtbot, window, dialogs):
    edit_nodes(window.doc, ["ib0"], "label", "spine")
    crash(window)
    dialogs.answers["question"] = QMessageBox.StandardButton.Yes
    other = MainWindow()
    qtbot.addWidget(other)
    assert other.offer_recovery()
    assert other.doc.node("ib0").label == "spine"
    assert other.windowTitle().startswith("dgx-a100-2x8.json")
    other.doc.undo_stack.undo()
    assert other.doc.node("ib0").label == "ib0"


def test_about_lists_versions(window, dialogs):
    window.named_actions["about"].trigger()
    kind, title, text = dialogs.calls[-1]
    assert kind == "about" and "Canopy" in title
    for name in ("Qt", "PySide6", "networkx", "maxflow backend"):
        assert name in text


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_opens_clean(window, name):
    assert window.open_sample(name)
    window.validation.check_now()
    assert window.validation.messages()[0].startswith("✓")
