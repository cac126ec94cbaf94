"""Run every command of the README and of docs/ in order, on a fresh clone, and say which fail.

    python3 bench/docs_commands.py [--here] [--with-tests] [--timeout S] [--json OUT]

The repository's committed state is cloned into a temporary folder and installed as the
README's test command installs it (``python3 -m venv .venv`` and ``pip install -e
'.[test,ray]'``). Then every line of every ``bash`` block runs there, in order: the README
first, then the pages of ``docs/`` in the order the README links them (any page it does not
link after those, by name), so a command that needs a file an earlier one wrote finds it.
Each runs in its own ``bash -c`` with the clone's ``.venv/bin`` first on the PATH and
``QT_QPA_PLATFORM=offscreen``.

Some commands are not run, each with its reason: one that opens a window and waits for
the user (``canopy`` alone, ``canopy gui`` or ``canopy sweep --plot`` without
``--screenshot``), one that installs system packages (``packaging/qt-system-libs.sh``,
which needs root), and the test command, which runs the whole suite (``--with-tests``
runs it too). ``--here`` runs in this checkout instead of a clone (quicker, but not a
fresh clone: files written by an earlier run are there).

Prints one line per command and, last, a JSON summary; exits 1 if any command failed.
``tests/test_readme.py`` runs the quick ``canopy`` commands in the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,ray]'"


@dataclass(frozen=True)
class Command:
    """One command line of the documentation: its page, line number and text."""

    page: str
    line: int
    text: str
    comment: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = ROOT) -> list[Path]:
    """README.md, then docs/ pages in the README's link order, then any other page."""
    readme = root / "README.md"
    linked = []
    for name in re.findall(r"\]\((docs/[^)#]+\.md)", readme.read_text(encoding="utf-8")):
        path = root / name
        if path.exists() and path not in linked:
            linked.append(path)
    rest = sorted(p for p in (root / "docs").glob("*.md") if p not in linked)
    return [readme, *linked, *rest]


def commands(root: Path = ROOT) -> list[Command]:
    """Every command line of the ``bash`` blocks of :func:`pages`, in order (a line ending
    in a backslash continues; a comment after two spaces and ``#`` is kept apart)."""
    out = []
    for page in pages(root):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"```bash\n(.*?)```", text, flags=re.S):
            first = text.count("\n", 0, match.start(1)) + 1
            pending, start = "", 0
            for offset, raw in enumerate(match.group(1).splitlines()):
                line = raw.rstrip()
                if not pending:
                    start = first + offset
                if line.endswith("\\"):
                    pending += line[:-1] + " "
                    continue
                line, _, comment = (pending + line).partition("  #")
                pending = ""
                if line.strip() and not line.lstrip().startswith("#"):
                    out.append(Command(str(page.relative_to(root)), start, line.strip(),
                                       comment.strip()))
    return out


def opens_a_window(words: list[str]) -> bool:
    """Whether a command line starts the editor or a plot and waits for the user."""
    for i, word in enumerate(words):
        if word == "canopy" or word.endswith("/canopy"):
            rest = words[i + 1:]
            rest = rest[:rest.index("&&")] if "&&" in rest else rest
            if not rest:
                return True
            if (rest[0] == "gui" or "--plot" in rest) and "--screenshot" not in rest:
                return True
    return False


def reason_to_skip(command: Command, with_tests: bool) -> str | None:
    """Why a command is not run, or None."""
    words = shlex.split(command.text)
    if "qt-system-libs.sh" in command.text:
        return "installs system packages (needs root); the install itself runs first"
    if "pytest" in words and not with_tests:
        return "runs the whole test suite (--with-tests runs it)"
    if opens_a_window(words):
        return "opens a window and waits for the user"
    return None


def prepare(here: bool, log: list[str]) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    """The folder the commands run in: a fresh clone, installed, unless ``here``."""
    if here:
        return ROOT, None
    holder = tempfile.TemporaryDirectory(prefix="canopy-docs-")
    clone = Path(holder.name) / "canopy"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    start = time.perf_counter()
    done = subprocess.run(["bash", "-c", INSTALL], cwd=clone, capture_output=True, text=True)
    log.append(f"setup {time.perf_counter() - start:6.1f} s  {INSTALL}")
    if done.returncode != 0:
        sys.exit(f"the install failed: {done.stderr.strip().splitlines()[-1:]}")
    return clone, holder


def run(command: Command, folder: Path, timeout: float) -> tuple[int, float, str]:
    """(exit code, seconds, last line of output) of one command in ``folder``."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               PATH=f"{folder / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               VIRTUAL_ENV=str(folder / ".venv"))
    start = time.perf_counter()
    try:
        done = subprocess.run(["bash", "-c", command.text], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, time.perf_counter() - start, f"timed out after {timeout:g} s"
    output = (done.stderr if done.returncode else done.stdout).strip().splitlines()
    return done.returncode, time.perf_counter() - start, output[-1] if output else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--here", action="store_true",
                        help="run in this checkout, not a fresh clone")
    parser.add_argument("--with-tests", action="store_true",
                        help="run the test command too (the whole suite)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one command may take (default 900)")
    parser.add_argument("--json", metavar="OUT", help="write the summary here too")
    args = parser.parse_args(argv)
    log: list[str] = []
    folder, holder = prepare(args.here, log)
    print(*log, sep="\n", flush=True)
    passed, failed, skipped = [], [], []
    start = time.perf_counter()
    for command in commands(folder):
        reason = reason_to_skip(command, args.with_tests)
        if reason is not None:
            skipped.append({"where": command.where, "command": command.text,
                            "reason": reason})
            print(f"skip           {command.where}  {command.text}  ({reason})", flush=True)
            continue
        code, seconds, last = run(command, folder, args.timeout)
        entry = {"where": command.where, "command": command.text,
                 "seconds": round(seconds, 1)}
        if code == 0:
            passed.append(entry)
            print(f"ok   {seconds:6.1f} s  {command.where}  {command.text}", flush=True)
        else:
            failed.append({**entry, "exit_code": code, "last_line": last})
            print(f"FAIL {seconds:6.1f} s  {command.where}  {command.text}\n"
                  f"     exit {code}: {last}", flush=True)
    summary = {"folder": "this checkout" if args.here else "a fresh clone",
               "commands": len(passed) + len(failed) + len(skipped), "passed": len(passed),
               "failed": failed, "skipped": len(skipped),
               "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {**summary, "passed_commands": passed, "skipped_commands": skipped}, indent=1)
            + "\n", encoding="utf-8")
    if holder is not None:
        holder.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
