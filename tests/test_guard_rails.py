"""Guard rails run with the tests: import layers (import-linter) and types (mypy).

Both tools find packages on the file system, not through the editable install's import
hook, so each run gets a throwaway ``canopy`` folder of links to the card's top-level
folders (the same mapping pyproject's ``package-dir`` installs).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def namespace_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("namespace")
    (root / "canopy").mkdir()
    for folder in ("engine", "app", "cli"):
        (root / "canopy" / folder).symlink_to(ROOT / folder, target_is_directory=True)
    return root


def _run(tool, args, namespace_root):
    env = dict(os.environ, PYTHONPATH=str(namespace_root), MYPYPATH=str(namespace_root))
    return subprocess.run([str(BIN / tool), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_import_layers_hold(namespace_root):
    done = _run("lint-imports", ["--no-cache"], namespace_root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "broken" in done.stdout and " 0 broken" in done.stdout


def test_packages_type_check(namespace_root):
    """The engine, the editor and the command line, in one run (PySide6's stubs are read
    once). mypy keeps its incremental cache in the checkout's .mypy_cache (its default;
    the folder ignores itself): a run after the first checks only the modules changed
    since and those that import them, with the same verdict as a run from scratch.

    From this namespace root ``canopy.app`` sees the engine's types; ``mypy app`` from the
    checkout cannot follow ``canopy.*`` imports (the editable install's hook) and reads
    them all as Any."""
    done = _run("mypy", ["-p", "canopy.engine", "-p", "canopy.app", "-p", "canopy.cli"],
                namespace_root)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.xdist_group("guard-rails-loadgroup")
def test_xdist_groups_hold(request):
    """pyproject's ``--dist loadgroup`` sends the tests of one ``xdist_group`` to one worker,
    so a module's cached results are computed once. pytest-xdist tells the scheduler by
    suffixing the node id with the group in the worker; where that suffix is lost (pytest
    9.2's structured node ids) the groups' tests spread over the workers and each
    computes the caches again, with nothing failing but this."""
    grouped = getattr(request.config.option, "loadgroup", False)   # set in a worker
    assert request.node.nodeid.endswith("@guard-rails-loadgroup") == grouped, (
        f"pytest {pytest.__version__} loses the xdist_group suffix; reinstall the test "
        "extras (pip install -e '.[test]') for the pytest pyproject allows")
