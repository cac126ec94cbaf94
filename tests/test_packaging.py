"""The distribution is installable: ``python -m build`` makes an sdist and a wheel, the
wheel carries the samples and icons as package data, and once installed into a fresh venv
its ``canopy`` command solves a bundled sample found through importlib.resources."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

# One worker runs the module: the wheel and its venv are built once per process.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_packaging")]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = "dgx-a100-2x8.json"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run outside the source tree, with nothing pointing back into it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


# Build outputs and caches of the checkout; a stale *.egg-info would leak its file list
# into the sdist and hide missing package-data declarations.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "out",
                                     "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """sdist, then the wheel built from that sdist (what ``python -m build`` does), from a
    clean copy of the working tree."""
    src = tmp_path_factory.mktemp("src") / "canopy"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCES)
    out = tmp_path_factory.mktemp("dist")
    done = run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], out)
    assert done.returncode == 0, done.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv with the wheel installed. Its dependencies (PySide6, OR-Tools, ...) come
    from this test environment instead of the network: a .pth file appends this
    environment's site-packages after the venv's own. Plain .pth lines do not run the
    .pth hooks found there, so the editable install of the checkout stays invisible."""
    env_dir = tmp_path_factory.mktemp("venv")
    assert run([sys.executable, "-m", "venv", "--without-pip", env_dir], env_dir).returncode == 0
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                  env_dir).stdout.strip()
    Path(purelib, "canopy_test_dependencies.pth").write_text("\n".join(site.getsitepackages()))
    done = run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
                "--no-deps", "--no-index", wheel], env_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    return env_dir


def test_wheel_carries_package_data_metadata_and_entry_points(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for sample in (ROOT / "samples").glob("*.json"):
        assert f"canopy/samples/{sample.name}" in names
    assert {"canopy/resources/canopy.svg", "canopy/resources/canopy.png"} <= names
    assert {n.split("/")[0] for n in names} == {"canopy", "canopy_collectives-0.1.0.dist-info"}
    info = f"canopy_collectives-{PROJECT['version']}.dist-info"
    archive = zipfile.ZipFile(wheel)
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "canopy = canopy.cli:run" in entry_points
    assert "[gui_scripts]" in entry_points and "canopy-editor = canopy.cli:gui_main" in entry_points
    metadata = archive.read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Project-URL: Source," in metadata
    assert "Classifier: Environment :: X11 Applications :: Qt" in metadata


def test_installed_canopy_solves_a_bundled_sample(venv, tmp_path):
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    locate = run([bin_dir / "python", "-c",
                  "from importlib.resources import files; "
                  f"print(files('canopy.samples') / {SAMPLE!r})"],
                 tmp_path)
    sample = Path(locate.stdout.strip())
    assert sample.is_file() and sample.is_relative_to(venv), locate.stderr
    solved = run([bin_dir / "canopy", "solve", sample], tmp_path)
    assert solved.returncode == 0, solved.stderr
    assert "optimal algbw" in solved.stdout


def test_installed_app_finds_icons_and_reports_its_version(venv, tmp_path):
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    icons = run([bin_dir / "python", "-c", "from canopy.app.resources import icon_path; "
                 "print(icon_path()); print(icon_path(svg=False))"], tmp_path)
    paths = [Path(line) for line in icons.stdout.split()]
    assert [p.name for p in paths] == ["canopy.svg", "canopy.png"], icons.stderr
    assert all(p.is_file() and p.is_relative_to(venv) for p in paths)
    version = run([bin_dir / "canopy", "--version"], tmp_path)
    assert version.stdout.splitlines()[0] == f"canopy {PROJECT['version']}"
