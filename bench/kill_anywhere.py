"""Kill the editor anywhere: SIGKILL at random moments of edits, saves, autosaves and
solves; the file on disk is always the old or the new version, never torn, and the
recovery file offers back every edit older than 2 s.

Each round starts a real editor (offscreen) on one topology file. A timer in it edits
(the label of one node counts edits: ``v<n>``), saves, solves and cancels at random,
writing what it does to a log before and after (the autosaver's writes too). Each round
aims its SIGKILL at one moment, in turn: anywhere (a random time), inside a save,
inside an autosave, or while an engine job runs (the round watches the log for the start
of that step and kills within a few milliseconds of it; the log tells afterwards what
was really under way). Then it checks:

* the file on disk reads, and is a version a save started (old or new, never torn) no
  older than the last save that finished;
* the newest of the file and the recovery file holds every edit made more than
  ``GRACE_SECONDS`` before the kill;
* no engine job the editor started is still running two seconds later;
* temporary files a save left behind are counted (a kill inside a save may leave one),
  and those that the next round's editor kept after it opened the file (none should be).

Prints one JSON summary (kills in all and by what was under way):

    nice -n 15 python -m bench.kill_anywhere --kills 200 --seed 1 > kills.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

GRACE_SECONDS = 2.0
STARVED_SECONDS = 0.5
"""A round whose editor paused longer than this (no timer tick) after the edit that is
due is counted as starved of CPU, not as a lost edit."""
NODE = "n0.gpu0"
TARGETS = ("anywhere", "save", "autosave", "solve")
"""What each round aims its kill at, in turn (the log's marks of its start: S, A, J)."""
MARKS = {"save": "S", "autosave": "A", "solve": "J"}

AUTOSAVE_LOG = r"""
from canopy.app.recovery import Autosaver
_write = Autosaver._write
def _logged_write(self, data, generation):
    log.write(f"A 0 {time.time()}\n")
    done = _write(self, data, generation)
    log.write(f"a 0 {time.time()}\n")
    return done
Autosaver._write = _logged_write
"""

EDITOR = r"""
import os, random, sys, time
from pathlib import Path
from canopy.engine.process.lifetime import die_with_parent
die_with_parent()         # a stopped benchmark leaves no editor behind
from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication
app = QApplication([])
QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, os.environ["SETTINGS"])
from canopy.app.commands import edit_nodes
from canopy.app.main_window import MainWindow
path, log = Path(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
AUTOSAVE_LOG
rng = random.Random(int(sys.argv[3]))
window = MainWindow()
window.doc.load(path)
window.show()
n = int(window.doc.node(NODE).label.removeprefix("v") or 0)

def tick():
    global n
    log.write(f"T {n} {time.time()}\n")
    pick = rng.random()
    if pick < 0.6:
        n += 1
        edit_nodes(window.doc, [NODE], "label", f"v{n}")
        log.write(f"E {n} {time.time()}\n")
    elif pick < 0.85:
        log.write(f"S {n} {time.time()}\n")
        window.save()
        log.write(f"s {n} {time.time()}\n")
    elif pick < 0.95:
        if not window.solver.controller.busy:
            window.solver.controller.solve(rng.choice(["allgather", "allreduce"]))
            log.write(f"J {n} {time.time()}\n")
    else:
        window.solver.controller.cancel()
    QTimer.singleShot(rng.randint(5, 150), tick)

log.write(f"R {n} {time.time()}\n")
print("READY", flush=True)
QTimer.singleShot(0, tick)
app.exec()
""".replace("NODE", repr(NODE)).replace("AUTOSAVE_LOG", AUTOSAVE_LOG)


LIGHT = r"""
import os, random, sys, time
from pathlib import Path
from canopy.engine.process.lifetime import die_with_parent
die_with_parent()         # a stopped benchmark leaves no editor behind
from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
app = QGuiApplication([])
from canopy.app.commands import edit_nodes
from canopy.app.document import Document
from canopy.app.recovery import Autosaver
from canopy.engine.forestcoll.solve import solve
from canopy.engine.process.child_jobs import ChildJob, warm_up_fork_server
path, log = Path(sys.argv[1]), open(sys.argv[2], "a", buffering=1)
AUTOSAVE_LOG
rng = random.Random(int(sys.argv[3]))
warm_up_fork_server()     # as the editor does at start-up
doc = Document()
doc.load(path)
saver = Autosaver(doc)
jobs = []
n = int(doc.node(NODE).label.removeprefix("v") or 0)

def tick():
    global n
    log.write(f"T {n} {time.time()}\n")
    pick = rng.random()
    if pick < 0.6:
        n += 1
        edit_nodes(doc, [NODE], "label", f"v{n}")
        log.write(f"E {n} {time.time()}\n")
    elif pick < 0.85:
        log.write(f"S {n} {time.time()}\n")
        doc.save(path)
        log.write(f"s {n} {time.time()}\n")
    elif pick < 0.95:
        job = ChildJob(solve, doc.snapshot(), rng.choice(["allgather", "allreduce"]))
        job.start()
        jobs.append(job)
        log.write(f"J {n} {time.time()}\n")
    elif jobs:
        jobs.pop(0).cancel()
    QTimer.singleShot(rng.randint(5, 150), tick)

log.write(f"R {n} {time.time()}\n")
print("READY", flush=True)
QTimer.singleShot(0, tick)
app.exec()
""".replace("NODE", repr(NODE)).replace("AUTOSAVE_LOG", AUTOSAVE_LOG)
"""The editor's save path without its window: the document, its undo stack, the autosaver
and engine jobs (starts in a fraction of the editor's time, so 200 kills run quickly)."""


def _label(data: dict) -> int:
    for node in data["nodes"]:
        if node["id"] == NODE:
            return int(str(node.get("label") or "v0").removeprefix("v") or 0)
    raise ValueError("the counted node is missing")


def _descendants(pid: int) -> set[int]:
    """Every process under ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _engine_jobs(pid: int) -> set[int]:
    """The engine's job processes under the editor ``pid``: the fork server's children
    (the fork server itself, started with the editor, is no job)."""
    server = {p for p in _descendants(pid) if _parent(p) == pid}
    return _descendants(pid) - server


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for_mark(log: Path, mark: str, proc: subprocess.Popen, limit: float) -> bool:
    """Poll the log until a line starting with ``mark`` appears that was not there
    before (or ``limit`` seconds pass, or the editor ends)."""
    seen = log.read_text().count(f"\n{mark} ")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if log.read_text().count(f"\n{mark} ") > seen:
            return True
        time.sleep(0.002)
    return False


def _under_way(events: list[list[str]], jobs: set[int]) -> list[str]:
    """What the editor was doing when it was killed: a save or an autosave started and
    not finished, engine processes alive."""
    doing = []
    for start, end, what in (("S", "s", "save"), ("A", "a", "autosave")):
        last = [e[0] for e in events if e[0] in (start, end)]
        if last and last[-1] == start:
            doing.append(what)
    if jobs:
        doing.append("solve")
    return doing or ["editing"]


def one_kill(folder: Path, path: Path, seed: int, rng: random.Random,
             script: str = EDITOR, target: str = "anywhere",
             left_before: tuple[Path, ...] = ()) -> dict:
    """Start an editor on ``path``, kill it at a moment aimed at ``target``, check what
    it left (``left_before``: the temporary files earlier kills left, which opening the
    file must have removed)."""
    log = folder / "log.txt"
    log.write_text("")
    recovery = folder / "recovery"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", CANOPY_RECOVERY_DIR=str(recovery),
               SETTINGS=str(folder / "settings"), CANOPY_LOG=str(folder / "canopy.log"))
    proc = subprocess.Popen([sys.executable, "-c", script, str(path), str(log), str(seed)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = proc.stdout.readline().strip() == "READY"
        if ready:
            time.sleep(rng.uniform(0.2, 6.0) if target == "anywhere" else
                       rng.uniform(0.2, 2.5))
            if target in MARKS and _wait_for_mark(log, MARKS[target], proc, 20.0):
                time.sleep(rng.uniform(0.0, 0.001))
        jobs = _descendants(proc.pid)
        working = {p for p in _engine_jobs(proc.pid) if _running(p)}   # before the kill
    finally:
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    stderr = proc.stderr.read()
    out: dict = {"ready": ready, "problems": [], "target": target}
    if not ready:
        out["problems"].append(f"the editor did not start: {stderr[-300:]}")
        return out
    events = [line.split() for line in log.read_text().splitlines() if line.strip()]
    out["under_way"] = _under_way(events, working)
    started = {int(e[1]) for e in events if e[0] in ("S", "R")}
    finished = max([int(e[1]) for e in events if e[0] in ("s", "R")])
    edits = [(int(e[1]), float(e[2])) for e in events if e[0] == "E"]
    due_at = {n: t for n, t in edits}
    due = max([n for n, t in edits if t < killed_at - GRACE_SECONDS] + [0])
    ticks = sorted(float(e[2]) for e in events if e[0] == "T")
    out["edits"], out["saves"] = len(edits), sum(e[0] == "s" for e in events)
    out["solves"] = sum(e[0] == "J" for e in events)
    try:
        on_disk = _label(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as exc:
        out["problems"].append(f"the file on disk is torn ({exc.__class__.__name__})")
        return out
    if on_disk not in started or on_disk < finished:
        out["problems"].append(f"the file holds v{on_disk}; saves started {sorted(started)}, "
                               f"the last finished v{finished}")
    recovered = None
    for file in recovery.glob("*.recovery.json") if recovery.is_dir() else []:
        try:
            recovered = max(recovered or 0, _label(json.loads(file.read_text())["topology"]))
        except (OSError, ValueError, KeyError) as exc:
            out["problems"].append(f"a recovery file is torn ({exc.__class__.__name__})")
        file.unlink()
    out["recovery_file"] = recovered is not None
    # the editor's timer ticks every 5-150 ms; a longer pause after the edit means the
    # process got no CPU (a loaded machine), and no autosave can be asked of it then
    after = [t for t in ticks if t >= due_at.get(due, killed_at)] + [killed_at]
    out["longest_pause"] = round(max(b - a for a, b in zip(after, after[1:], strict=False))
                                 if len(after) > 1 else 0.0, 2)
    if max(on_disk, recovered or 0) < due and out["longest_pause"] > STARVED_SECONDS:
        out["starved"] = True
    elif max(on_disk, recovered or 0) < due:
        out["problems"].append(f"edit v{due} was made {GRACE_SECONDS} s before the kill but "
                               f"the file holds v{on_disk} and the recovery file "
                               f"{'nothing' if recovered is None else f'v{recovered}'}")
    deadline = time.monotonic() + 2.0
    while any(_running(p) for p in jobs) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in jobs if _running(p)]
    if left:
        out["problems"].append(f"{len(left)} engine process(es) outlived the editor")
        for p in left:
            os.kill(p, signal.SIGKILL)
    out["engine_processes"] = len(jobs)
    temps = set(path.parent.glob(f".{path.name}.*.tmp"))
    out["temp_files_left"] = len(temps - set(left_before))
    # the next round's editor opens the file, which removes what killed saves left
    out["temp_files_kept_after_open"] = len(temps & set(left_before))
    if out["temp_files_kept_after_open"]:
        out["problems"].append(f"{out['temp_files_kept_after_open']} temporary file(s) of "
                               "killed saves outlived the next opening of the file")
    return out


def run(kills: int, seed: int, servers: int = 8, light: bool = False) -> dict:
    from canopy.engine.generators import generate
    from canopy.engine.io.topology_json import save_topology
    rng = random.Random(seed)
    totals: Counter[str] = Counter()
    problems: list[str] = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="canopy-kill-") as scratch:
        folder = Path(scratch)
        path = folder / "cluster.json"
        topology = generate("cluster", {"servers": servers, "gpus": 8})
        next(n for n in topology.nodes if n.id == NODE).label = "v0"
        save_topology(topology, path)
        for i in range(kills):
            result = one_kill(folder, path, seed * 1000 + i, rng, LIGHT if light else EDITOR,
                              TARGETS[i % len(TARGETS)],
                              tuple(folder.glob(f".{path.name}.*.tmp")))
            totals["kills"] += 1
            for what in result.get("under_way", []):
                totals[f"killed_during_{what}"] += 1
            for key in ("edits", "saves", "solves", "engine_processes", "temp_files_left",
                        "temp_files_kept_after_open"):
                totals[key] += result.get(key, 0)
            totals["recovery_files"] += bool(result.get("recovery_file"))
            totals["rounds_with_problems"] += bool(result["problems"])
            totals["starved_rounds"] += bool(result.get("starved"))
            problems += [f"kill {i}: {p}" for p in result["problems"]]
            print(f"kill {i}: {result}", file=sys.stderr)
    return {"seed": seed, "editor": "save path only" if light else "whole editor",
            **dict(totals), "problems": problems[:50],
            "wall_seconds": round(time.monotonic() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--servers", type=int, default=8,
                        help="servers of 8 GPUs in the edited cluster (larger: longer saves)")
    parser.add_argument("--light", action="store_true",
                        help="kill the editor's save path (document, autosaver, engine jobs) "
                        "without its window: the same saves, a much faster start")
    args = parser.parse_args()
    print(json.dumps(run(args.kills, args.seed, args.servers, args.light), indent=1))


if __name__ == "__main__":
    main()
