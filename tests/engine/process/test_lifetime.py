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
    import sys, time
    from canopy.engine.process.child_jobs import ChildJob
    from tests.job_targets import spin
    if __name__ == "__main__":
        job = ChildJob(spin, sys.argv[1])
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
