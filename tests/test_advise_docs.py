"""docs/advise.md's worked example runs as written and prints what the page shows."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from canopy.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "advise.md"


def test_worked_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = DOC.read_text(encoding="utf-8")
    printed = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line)
            if words[:1] == ["echo"]:
                Path(words[3]).write_text(words[1])
            elif words[:1] == ["canopy"]:
                assert main(words[1:]) == 0, line
                printed.append(capsys.readouterr().out)
    assert len(printed) == 4 and Path("design.png").stat().st_size > 0
    for shown in re.findall(r"```\n(optimum:.*?|target:.*?)```", text, flags=re.S):
        for line in shown.splitlines():
            if line.strip() and line.strip() != "...":
                assert any(line.rstrip() in out for out in printed), line
    advice = json.loads(Path("advice.json").read_text())
    assert advice["target"]["price"] == "14400"
