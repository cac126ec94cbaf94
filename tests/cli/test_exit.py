"""The ``canopy`` command ends without tearing its objects down: after its exit handlers,
with its output flushed, with its command's exit code; the editor exits as usual."""

import json
import subprocess
import sys

import pytest

from canopy import cli
from tests import ROOT


class _Ended(Exception):
    """Raised where the process would have ended (``os._exit``)."""


def test_a_command_runs_the_exit_handlers_and_ends_with_its_code(monkeypatch):
    events = []

    def end(code):
        events.append(("end", code))
        raise _Ended

    monkeypatch.setattr(cli, "main", lambda: 2)
    monkeypatch.setattr(cli.sys, "argv", ["canopy", "solve", "missing.json"])
    monkeypatch.setattr(cli.atexit, "_run_exitfuncs", lambda: events.append("handlers"))
    monkeypatch.setattr(cli.os, "_exit", end)
    with pytest.raises(_Ended):
        cli.run()
    assert events == ["handlers", ("end", 2)]


def test_the_editor_exits_as_usual(monkeypatch):
    monkeypatch.setattr(cli, "main", lambda: 0)
    monkeypatch.setattr(cli.os, "_exit", lambda code: pytest.fail("Qt's teardown skipped"))
    for argv in (["canopy"], ["canopy", "gui", "--screenshot", "shot.png"]):
        monkeypatch.setattr(cli.sys, "argv", argv)
        with pytest.raises(SystemExit) as ended:
            cli.run()
        assert ended.value.code == 0


def test_the_output_and_the_files_written_are_whole(tmp_path):
    """Run as a user runs it: the JSON on standard output parses (flushed before the
    process ends), the table goes to standard error, the exit code is the command's."""
    sample = ROOT / "samples" / "forestcoll-fig2.json"
    done = subprocess.run([sys.executable, "-m", "canopy.cli", "compare", str(sample),
                           "--algorithms", "ring", "--json", "-"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [r["algorithm"] for r in json.loads(done.stdout)["rows"]] == ["forestcoll", "ring"]
    bad = subprocess.run([sys.executable, "-m", "canopy.cli", "compare",
                          str(tmp_path / "missing.json")], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "missing.json" in bad.stderr
