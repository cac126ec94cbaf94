"""Editor soak: long random sequences of editor actions, with invariants after each step.

A real editor window (offscreen) is driven through random actions: add, move, delete,
link, edit a bandwidth, group, copy, paste, undo, redo, find, solve, cancel, compare,
open, save and recover. After every action:

* no exception reached Qt's event loop (an exception hook records any);
* results shown as current (``controller.fresh``) were computed on the document as it
  is now (their signature is the document's);
* after a save, reading the file back gives the document;
* after a recovery write, the recovery file holds the document.

Every ``--check-every`` actions, and at the end, undoing everything gives back the
document as opened, and redoing it all gives back the document as it was.

``tests/gui/test_editor_soak.py`` runs a few hundred actions; this script runs thousands:

    QT_QPA_PLATFORM=offscreen nice -n 15 python -m bench.editor_soak --actions 3000 > soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ACTIONS = ["add", "move", "delete", "link", "bandwidth", "group", "copy", "paste", "undo",
           "redo", "find", "solve", "cancel", "compare", "open", "save", "recover", "wait"]
WEIGHTS = [8, 8, 4, 8, 8, 4, 3, 3, 12, 8, 2, 3, 2, 1, 1, 3, 2, 3]
SAMPLES = ["forestcoll-fig2.json", "dgx-a100-2x8.json", "mesh-2d-3x3.json",
           "hypercube-3d.json"]


def plain(window: Any) -> dict[str, Any]:
    """The document as plain data (what saving writes), for comparisons."""
    from canopy.engine.io.topology_json import topology_to_dict
    return json.loads(json.dumps(topology_to_dict(window.doc.topology)))


class Soak:
    """Drives one editor window; :meth:`step` does one random action and checks."""

    def __init__(self, window: Any, rng: random.Random, folder: Path) -> None:
        self.window, self.rng, self.folder = window, rng, folder
        self.doc = window.doc
        self.counts: Counter[str] = Counter()
        self.slowest: dict[str, float] = {}
        self.problems: list[str] = []
        self.errors: list[str] = []
        self.serial = 0
        self.opened: dict[str, Any] = plain(window)
        self.hook_previous = sys.excepthook
        sys.excepthook = self._hook

    def _hook(self, kind: type, value: BaseException, tb: Any) -> None:
        self.errors.append("".join(traceback.format_exception(kind, value, tb))[-800:])

    def close(self) -> None:
        sys.excepthook = self.hook_previous

    # ------------------------------------------------------------ actions

    def _nodes(self, k: int = 1) -> list[str]:
        ids = self.doc.node_ids()
        return self.rng.sample(ids, min(k, len(ids))) if ids else []

    def _links(self, k: int = 1) -> list[int]:
        keys = self.doc.link_keys()
        return self.rng.sample(keys, min(k, len(keys))) if keys else []

    def do_add(self) -> None:
        from canopy.app.commands import InsertItems
        from canopy.engine.model.topology import COMPUTE, SWITCH, Node
        self.serial += 1
        while self.doc.has_node(f"soak{self.serial}"):   # a paste may have taken it
            self.serial += 1
        node = Node(f"soak{self.serial}", self.rng.choice([COMPUTE, SWITCH]),
                    x=self.rng.uniform(-500, 500), y=self.rng.uniform(-500, 500))
        self.doc.undo_stack.push(InsertItems(self.doc, [node], [], f"Add {node.id}"))

    def do_move(self) -> None:
        from canopy.app.commands import MoveNodes
        ids = self._nodes(self.rng.randint(1, 4))
        if ids:
            old = {n: (self.doc.node(n).x, self.doc.node(n).y) for n in ids}
            dx, dy = self.rng.uniform(-80, 80), self.rng.uniform(-80, 80)
            new = {n: ((x or 0) + dx, (y or 0) + dy) for n, (x, y) in old.items()}
            self.doc.undo_stack.push(MoveNodes(self.doc, old, new))

    def do_delete(self) -> None:
        from canopy.app.commands import delete
        ids = self._nodes(self.rng.randint(0, 2))
        gone = set(ids)
        keys = [k for k in self._links(self.rng.randint(0, 2))
                if not {self.doc.link(k).source, self.doc.link(k).target} & gone]
        keys += [k for n in ids for k in self.doc.links_of(n) if k not in keys]
        delete(self.doc, ids, keys)

    def do_link(self) -> None:
        from canopy.app.commands import InsertItems
        from canopy.engine.model.topology import Link
        pair = self._nodes(2)
        if len(pair) == 2:
            link = Link(pair[0], pair[1], Fraction(self.rng.choice([1, 3, 25, 50, 300])),
                        duplex=self.rng.random() < 0.8)
            self.doc.undo_stack.push(InsertItems(self.doc, [], [link], "Add link"))

    def do_bandwidth(self) -> None:
        from canopy.app.commands import edit_links
        keys = self._links(self.rng.randint(1, 3))
        if keys:
            value = self.rng.choice([Fraction(1, 3), Fraction(25), Fraction("12.5"),
                                     Fraction(10**30), Fraction(1, 10**12), Fraction(400)])
            edit_links(self.doc, keys, "bandwidth", value)

    def do_group(self) -> None:
        from canopy.app.commands import edit_nodes
        ids = self._nodes(self.rng.randint(1, 4))
        if ids:
            edit_nodes(self.doc, ids, "group", self.rng.choice(["", "g1", "g2", "rack é"]))

    def do_copy(self) -> None:
        self.window.scene.select(self._nodes(self.rng.randint(1, 3)))
        self.window.named_actions["copy"].trigger()

    def do_paste(self) -> None:
        self.window.named_actions["paste"].trigger()

    def do_undo(self) -> None:
        self.doc.undo_stack.undo()

    def do_redo(self) -> None:
        self.doc.undo_stack.redo()

    def do_find(self) -> None:
        self.window.show_find_bar()
        self.window.find_bar.search(self.rng.choice(["gpu", "soak", "nvswitch", "x", ""]))
        self.window.find_bar.step(1)
        if self.rng.random() < 0.5:
            self.window.find_bar.close_bar()

    def do_solve(self) -> None:
        self.window.solver.controller.solve(self.rng.choice(["allgather", "allreduce",
                                                             "reduce-scatter"]))

    def do_cancel(self) -> None:
        self.window.solver.controller.cancel()

    def do_wait(self) -> None:
        self.window.solver.controller.wait(20_000)

    def do_compare(self) -> None:
        self.window.compare.dock.start(sizes=(1 << 20,))

    def do_open(self) -> None:
        from canopy.engine.io.topology_json import load_sample, save_topology
        path = self.folder / f"open-{self.serial}.json"
        self.serial += 1
        save_topology(load_sample(self.rng.choice(SAMPLES)), path)
        self.doc.undo_stack.setClean()        # no "save changes?" question
        self.window.open_path(path)
        self.opened = plain(self.window)

    def do_save(self) -> None:
        from canopy.engine.io.topology_json import load_topology, topology_to_dict
        path = self.doc.path or self.folder / "saved.json"
        if not self.window._save_to(Path(path)):
            self.problems.append(f"saving {path} failed")
            return
        again = json.loads(json.dumps(topology_to_dict(load_topology(path))))
        if again != plain(self.window):
            self.problems.append("saving and reading back changed the document")

    def do_recover(self) -> None:
        from canopy.engine.io.topology_json import topology_from_dict, topology_to_dict
        saver = self.window.autosaver
        if saver.write_if_modified():
            data = json.loads(saver.file.read_text(encoding="utf-8"))
            back = topology_to_dict(topology_from_dict(data["topology"], "recovery"))
            if json.loads(json.dumps(back)) != plain(self.window):
                self.problems.append("the recovery file differs from the document")

    # ------------------------------------------------------------ invariants

    def check_fresh(self) -> None:
        controller = self.window.solver.controller
        controller.check_now()
        if controller.fresh and \
                controller.solution.signature != self.doc.topology.fingerprint():
            self.problems.append("results shown as current for another document")

    def check_undo_all(self) -> None:
        """Undo everything (the document as opened), then redo it all (as it was)."""
        stack = self.doc.undo_stack
        now, index = plain(self.window), stack.index()
        stack.setIndex(0)
        if plain(self.window) != self.opened:
            self.problems.append(f"undoing all {index} steps did not give the document "
                                 "as opened")
        stack.setIndex(index)
        if plain(self.window) != now:
            self.problems.append("redoing everything did not give the document back")

    def step(self) -> str:
        from PySide6.QtWidgets import QApplication
        action = self.rng.choices(ACTIONS, WEIGHTS)[0]
        if os.environ.get("CANOPY_SOAK_TRACE"):
            print(f"{sum(self.counts.values())} {action}", file=sys.stderr, flush=True)
        errors = len(self.errors)
        start = time.monotonic()
        try:
            getattr(self, f"do_{action}")()
        except Exception:  # an action's own exception: a finding, like the hook's
            self.errors.append(traceback.format_exc()[-800:])
        QApplication.processEvents()
        self.check_fresh()
        if len(self.errors) > errors:
            self.problems.append(f"{action}: an exception reached the event loop")
        self.counts[action] += 1
        took = time.monotonic() - start
        if took > self.slowest.get(action, 0.0):
            self.slowest[action] = round(took, 2)
        return action

    def run(self, actions: int, check_every: int) -> None:
        for i in range(1, actions + 1):
            self.step()
            if i % check_every == 0:
                self.check_undo_all()
        self.window.solver.controller.cancel()
        self.check_undo_all()


def soak(actions: int, seed: int, check_every: int = 50) -> dict[str, Any]:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

    from canopy.app.main_window import MainWindow
    from canopy.engine.io.topology_json import load_sample
    app = QApplication.instance() or QApplication([])
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="canopy-soak-") as scratch:
        folder = Path(scratch)
        os.environ["CANOPY_RECOVERY_DIR"] = str(folder / "recovery")
        QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                          str(folder / "settings"))
        dialogs: list[str] = []
        for kind in ("warning", "question", "critical", "information"):
            setattr(QMessageBox, kind, staticmethod(
                lambda *a, kind=kind, **k: dialogs.append(f"{kind}: {a[2] if len(a) > 2 else ''}")
                or QMessageBox.StandardButton.No))
        QFileDialog.getSaveFileName = staticmethod(lambda *a, **k: ("", ""))
        window = MainWindow()
        window.doc.set_topology(load_sample("dgx-a100-2x8.json"), None,
                                display_name="dgx-a100-2x8.json")
        window.resize(1200, 800)
        window.show()
        driver = Soak(window, random.Random(seed), folder)
        try:
            driver.run(actions, check_every)
        finally:
            driver.close()
            window.solver.controller.cancel()
            window.doc.undo_stack.setClean()
            # tear the window down while Qt is alive, as the editor does as it quits
            # (left to the interpreter's exit, it crashed it: SIGSEGV after the summary)
            window.close()
            window.deleteLater()
            app.processEvents()
    return {"seed": seed, "actions": sum(driver.counts.values()),
            "per_action": dict(driver.counts), "slowest_seconds": driver.slowest,
            "problems": driver.problems[:50],
            "exceptions": driver.errors[:10], "dialogs": len(dialogs),
            "dialog_samples": dialogs[:10], "wall_seconds": round(time.monotonic() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actions", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check-every", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(soak(args.actions, args.seed, args.check_every), indent=1))


if __name__ == "__main__":
    main()
