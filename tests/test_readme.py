"""The README and docs/: one screen for a newcomer, and every quick ``canopy`` example runs
as written, in order, in a fresh folder.

``bench/docs_commands.py`` runs every command of the README and docs/ on a fresh clone;
here, in the suite, the ``canopy`` commands run in-process, in the same order, except
those that open a window and wait, those needing Ray (``--executor ray``; the sweep tests
cover it) and those whose comment says they take a minute (the script runs them).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bench.docs_commands import commands, opens_a_window, pages
from canopy.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


# the README's pages (other pages, e.g. docs/advise.md, set up files with shell commands; the
# script runs those)
OWN_PAGES = {"README.md", *(f"docs/{name}.md" for name in (
    "editor", "command-line", "formats", "how-it-works", "architecture", "performance",
    "install"))}


def quick_canopy_commands() -> list[str]:
    out = []
    for command in commands(ROOT):
        if command.page not in OWN_PAGES:
            continue
        words = shlex.split(command.text)
        if not words or words[0] != "canopy" or opens_a_window(words):
            continue
        if ("--executor" in words and "ray" in words) or "minute" in command.comment:
            continue
        out.append(command.text)
    return out


def test_the_readme_is_one_screen_with_the_two_commands_and_links():
    assert len(README.splitlines()) <= 60
    assert "![" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = next(line for line in README.splitlines() if "pytest" in line)
    assert test_command in ci, "the README's test command is what .ci/run runs"
    assert ".venv/bin/canopy" in README
    session = re.search(r"## A first session.*?```bash\n(.*?)```", README, flags=re.S)
    assert session is not None and len(session.group(1).splitlines()) == 5
    for name in ("editor", "command-line", "formats", "how-it-works", "architecture",
                 "performance", "install"):
        assert f"](docs/{name}.md)" in README, f"the README links docs/{name}.md"
    assert len(pages(ROOT)) > 7


def test_the_docs_have_examples_of_every_verb():
    verbs = {shlex.split(c)[1] for c in quick_canopy_commands()}
    assert {"solve", "verify", "gui", "generate", "import-nccl", "compare",
            "check-xml", "fabric", "export-nccl-topo"} <= verbs


def test_every_quick_example_runs_in_order(tmp_path, monkeypatch, capsys):
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    for command in quick_canopy_commands():
        code = main(shlex.split(command)[1:])
        out = capsys.readouterr()
        if code != 0:
            pytest.fail(f"documented example failed with exit code {code}: {command}\n"
                        f"{out.err}")
    assert (tmp_path / "cluster.json").exists() and (tmp_path / "h100.json").exists()
