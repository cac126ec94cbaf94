"""Engine jobs end with whatever started them, and a hundred cancels leave nothing behind.

A command or editor killed from outside (SIGKILL, SIGTERM, its terminal closed: SIGHUP)
must leave no engine job computing (canopy.engine.process.lifetime); cancelling a
hundred solves in a row leaves no child process, no temporary file and no growth of
memory; a child that passes the memory budget is stopped with one sentence
(canopy.engine.process.memory_guard)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from canopy.engine.process.child_jobs import ChildJob
from canopy.engine.process.lifetime import die_with_parent
from tests import ROOT, job_targets

PARENT = textwrap.dedent("""
    import signal, sys, time
    from canopy.engine.process.child_jobs import ChildJob
    from tests.job_targets import spin_quietly
    if __name__ == "__main__":
        signal.signal(signal.SIGHUP, signal.SIG_DFL)   # as from a terminal, even under nohup
        job = ChildJob(spin_quietly, sys.argv[1])
        job.start()
        time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie waiting for its (dead) parent's reaper counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_a_killed_parent_leaves_no_engine_job(tmp_path, sig):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file)],
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 180      # a loaded machine starts Python slowly
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not pid_file.exists():
        parent.kill()
        pytest.skip("the parent did not start its engine job within 3 minutes")
    child = int(pid_file.read_text())
    assert _alive(child)
    parent.send_signal(sig)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(child):
        os.kill(child, signal.SIGKILL)
        pytest.fail(f"the engine job outlived its parent (killed with {sig.name})")


def _processes() -> dict[int, tuple[int, str]]:
    """Every live process: its parent and its command line."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, UnicodeDecodeError):
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = (int(fields[1]), command)
    return found


def _descendants(root: int, processes: dict[int, tuple[int, str]]) -> set[int]:
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, (parent, _) in processes.items() if parent in frontier} - found
        found |= frontier
    return found


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LONG_SWEEP = """
collectives = ["allgather"]
algorithms = ["bound"]
sizes = ["1G"]
time_limit = 600
[[generator]]
kind = "cluster"
params = { servers = 512, gpus = 8, scale-out = "leaf-spine", servers-per-leaf = 4, spines = 16 }
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("moment", ["loading", "computing"])
def test_a_killed_command_leaves_no_process_behind(tmp_path, moment):
    """A real ``canopy sweep`` killed with SIGKILL while its fork server loads the engine,
    or while an engine job computes a point (past its start, on a 4096-GPU cluster's
    bound: it says nothing to its parent for many seconds): within seconds none of its
    processes is left (the fork server once waited for the job and the job for the fork
    server, computing on for minutes)."""
    spec = tmp_path / "long.toml"
    spec.write_text(LONG_SWEEP)
    command = subprocess.Popen([str(Path(sys.executable).parent / "canopy"), "sweep",
                                str(spec), "-o", str(tmp_path / "out.csv"), "--workers", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, found = time.monotonic() + 180, set()
    try:
        while time.monotonic() < deadline:
            processes = _processes()
            found = _descendants(command.pid, processes)
            servers = {p for p in found if "forkserver" in processes[p][1]
                       and processes[p][0] == command.pid}
            jobs = {p for p in found if processes[p][0] in servers and _cpu_seconds(p) > 0.3}
            if (servers and moment == "loading") or (jobs and moment == "computing"):
                break
            time.sleep(0.02)
    finally:
        command.kill()
        command.wait(10)
    assert found, "the sweep started no process within 3 minutes"
    deadline = time.monotonic() + 5
    while (left := found & set(_processes())) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} of the killed command's processes outlived it by 5 s"


FROM_A_THREAD = textwrap.dedent("""
    import json, os, threading
    from multiprocessing import forkserver
    from canopy.engine.process.child_jobs import ChildJob
    from tests.job_targets import echo

    def run():
        job = ChildJob(echo, 1)
        job.start()
        return job.wait(120)[-1]

    if __name__ == "__main__":
        got = []
        worker = threading.Thread(target=lambda: got.append(run()))
        worker.start()
        worker.join()
        server = forkserver._forkserver._forkserver_pid
        got.append(run())
        print(json.dumps({"events": got, "same_server": server
                          == forkserver._forkserver._forkserver_pid,
                          "threads": len(os.listdir(f"/proc/{server}/task"))}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_fork_server_started_from_a_thread_outlives_the_thread(tmp_path):
    """The kernel's death signal follows the thread that started a process: a fork
    server started from a reader thread must not end with that thread. Once loaded it
    runs one thread (its watch of the parent while loading has stopped)."""
    script = tmp_path / "thread.py"
    script.write_text(FROM_A_THREAD)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"events": [["done", 1], ["done", 1]], "same_server": True,
                      "threads": 1}


def test_die_with_parent_says_how():
    assert die_with_parent.__doc__
    if sys.platform.startswith("linux"):
        # in a throwaway child: the setting would otherwise stay on the test process
        code = "from canopy.engine.process.lifetime import die_with_parent; " \
               "print(die_with_parent())"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
        assert out.stdout.strip() == "prctl"


HUNDRED_CANCELS = textwrap.dedent("""
    import json, os, time
    from pathlib import Path
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.process.child_jobs import ChildJob
    from canopy.engine.process.memory_guard import resident_bytes
    from canopy.engine.io.topology_json import load_sample

    def children():
        found = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.add(int(stat.parent.name))
        return found

    if __name__ == "__main__":
        topology = load_sample("dgx-a100-4x8.json")
        warm = ChildJob(solve, topology, "allreduce")
        warm.start()
        warm.cancel()
        before, memory, pids = children(), resident_bytes(), []
        for i in range(100):
            job = ChildJob(solve, topology, "allreduce")
            job.start()
            if i % 3:
                time.sleep(0.01 * (i % 5))
            pids.append(job._process.pid)
            job.cancel()
        time.sleep(0.5)
        alive = [p for p in pids if Path(f"/proc/{p}").exists()]
        print(json.dumps({"alive": alive, "new_children": sorted(children() - before),
                          "growth": resident_bytes() - memory}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_hundred_cancelled_solves_leave_nothing_behind(tmp_path, request):
    """In a process of its own, with a private temporary folder (the shared one sees
    other programs' files), so that everything left behind is this test's."""
    script = tmp_path / "cancels.py"
    script.write_text(HUNDRED_CANCELS)
    # short: the fork server's socket lives in it, and a socket path has at most 107 bytes
    private = Path(tempfile.mkdtemp(prefix="canopy-cancels-"))
    request.addfinalizer(lambda: shutil.rmtree(private, ignore_errors=True))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600,
                         env={**os.environ, "TMPDIR": str(private), "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["alive"] == [] and result["new_children"] == []
    assert result["growth"] < 30 << 20
    assert not [p for p in private.iterdir() if not p.name.startswith("pymp-")]


def test_a_child_past_the_memory_budget_is_stopped_with_one_sentence(monkeypatch):
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "200M")
    job = ChildJob(job_targets.grow)
    job.start()
    kind, message = job.wait(60)[-1]
    assert kind == "failed"
    assert "memory budget of 200 MiB" in message and "\n" not in message
