"""Every ``canopy`` example of the README runs, in order, as written, in a fresh folder.

Only the commands that would open a window and wait for the user (``canopy`` alone,
``canopy gui FILE`` or ``canopy sweep --plot`` without ``--screenshot``) and those needing
an optional extra (``--executor ray``, which starts a Ray cluster; the sweep tests cover
it) are left out;
everything else (solves, exports, imports, sweeps, screenshots) runs in the order the
README gives, so an example that needs a file made by an earlier one finds it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from canopy.cli import main

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The ``canopy`` command lines of the README's bash blocks, comments removed."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if not line.startswith("canopy"):
                continue
            words = shlex.split(line)
            interactive = words == ["canopy"] or (
                (words[1] == "gui" or "--plot" in words) and "--screenshot" not in words)
            optional = "--executor" in words and "ray" in words
            if not interactive and not optional:
                commands.append(line)
    return commands


def test_the_readme_has_examples_of_every_verb():
    verbs = {shlex.split(c)[1] for c in readme_commands()}
    assert {"solve", "verify", "gui", "generate", "import-nccl", "compare",
            "check-xml"} <= verbs


def test_every_readme_example_runs_in_order(tmp_path, monkeypatch, capsys):
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    for command in readme_commands():
        code = main(shlex.split(command)[1:])
        out = capsys.readouterr()
        if code != 0:
            pytest.fail(f"README example failed with exit code {code}: {command}\n{out.err}")
    assert (tmp_path / "cluster.json").exists() and (tmp_path / "ar.xml").exists()
