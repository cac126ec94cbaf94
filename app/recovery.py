"""Autosave and crash recovery.

While a document has unsaved changes, a recovery file is written within
``DEBOUNCE_MS`` (1 s) of every edit, and every 30 seconds besides, atomically into the
recovery directory: ``$CANOPY_RECOVERY_DIR`` if set, else Qt's
AppDataLocation ``/recovery``. A clean save or a normal exit deletes it. The file name
carries the writer's process id, so at the next start a recovery file whose process is
gone is the trace of a crash, and the editor offers to restore it.

The edit's snapshot is taken on the GUI thread (a plain dict, milliseconds even for
large topologies); serialising and the fsync'd atomic write run on one background
thread, so a slow disk never stalls the editor. A kill -9 two seconds after an edit loses
nothing (tests/app/test_recovery_kill.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal

from canopy.app.document import Document
from canopy.app.heap import collector_paused
from canopy.engine.io.topology_json import atomic_write_text, topology_from_dict, topology_to_dict
from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import Topology

INTERVAL_MS = 30_000
DEBOUNCE_MS = 1_000
FORMAT = "canopy-recovery"
SUFFIX = ".recovery.json"


def recovery_dir() -> Path:
    """Where recovery files live (created on demand)."""
    env = os.environ.get("CANOPY_RECOVERY_DIR")
    if env:
        return Path(env)
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    return Path(base or Path.home() / ".canopy") / "recovery"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


@dataclass
class Recovered:
    """A recovery file left behind by a session that did not exit normally."""

    file: Path
    topology: Topology
    original_path: Path | None
    saved_at: float
    display_name: str

    def discard(self) -> None:
        self.file.unlink(missing_ok=True)


def orphaned() -> list[Recovered]:
    """Recovery files whose writer is no longer running, newest first (unreadable ones skipped)."""
    folder = recovery_dir()
    if not folder.is_dir():
        return []
    found = []
    for file in folder.glob(f"*{SUFFIX}"):
        try:
            pid = int(file.name.split("-", 1)[0])
        except ValueError:
            continue
        if _alive(pid):
            continue
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                continue
            topology = topology_from_dict(data["topology"], str(file))
        except (OSError, ValueError, KeyError, TopologyError):
            continue
        original = data.get("original_path")
        found.append(Recovered(file, topology, Path(original) if original else None,
                               float(data.get("saved_at", 0.0)),
                               str(data.get("display_name") or topology.name)))
    return sorted(found, key=lambda r: r.saved_at, reverse=True)


class Autosaver(QObject):
    """Writes the document's recovery file soon after every edit (and every 30 s) while it
    has unsaved changes."""

    failed = Signal(str)
    """One sentence when a recovery file cannot be written (the editor shows it)."""

    def __init__(self, doc: Document, interval_ms: int = INTERVAL_MS,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.doc = doc
        self.file = recovery_dir() / f"{os.getpid()}-{id(self):x}{SUFFIX}"
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.write_if_modified)
        self.timer.start()
        self.debounce = QTimer(self)
        self.debounce.setSingleShot(True)
        self.debounce.setInterval(DEBOUNCE_MS)
        self.debounce.timeout.connect(self.write_in_background)
        self._lock = threading.Lock()
        self._generation = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recovery")
        doc.edited.connect(self._edited)
        doc.undo_stack.indexChanged.connect(self._edited)
        doc.undo_stack.cleanChanged.connect(self._clean_changed)
        doc.reset.connect(self.remove)

    def _edited(self, *_: object) -> None:
        """Write within DEBOUNCE_MS of the first of a burst of edits (a drag's many moves
        make one write, never a postponed one)."""
        if not self.debounce.isActive():
            self.debounce.start()

    def _snapshot(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": 1, "saved_at": time.time(),
                "original_path": str(self.doc.path) if self.doc.path else None,
                "display_name": self.doc.display_name,
                "topology": topology_to_dict(self.doc.topology)}

    def write_if_modified(self) -> bool:
        """Write the recovery file now if there is anything unsaved; True if written."""
        if not self.doc.modified:
            return False
        return self._write(self._snapshot(), self._generation)

    def write_in_background(self) -> None:
        """Snapshot now; serialise and write on the background thread."""
        if self.doc.modified:
            self._writer.submit(self._write, self._snapshot(), self._generation)

    def _write(self, data: dict[str, Any], generation: int) -> bool:
        """Write the recovery file (on the writer thread, or the GUI thread); the failure
        is signalled after the lock is let go, so no Qt call happens under it, and the
        cyclic collector is paused meanwhile (:class:`canopy.app.heap.collector_paused`)."""
        with collector_paused():
            text = json.dumps(data)
        with self._lock:
            if generation != self._generation:
                return False             # saved or reset since the snapshot
            try:
                self.file.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(self.file, text)
                failure = None
            except OSError as exc:
                failure = f"Autosave to {self.file.parent} failed ({exc.strerror or exc})."
        if failure is not None:
            self.failed.emit(failure)
            return False
        return True

    def _clean_changed(self, clean: bool) -> None:
        if clean:
            self.remove()

    def remove(self) -> None:
        """Delete this session's recovery file (after a save, a reset or a normal exit)."""
        self.debounce.stop()
        with self._lock:
            self._generation += 1
            with contextlib.suppress(OSError):   # an unusable folder holds no file
                self.file.unlink(missing_ok=True)
