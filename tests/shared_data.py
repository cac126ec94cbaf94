"""Where the tests look for the project's shared folder (``../shared`` beside the checkout).

A fresh clone has no such folder: every test that reads it is marked ``shared_data`` and
skips with the folder's path as its reason. ``CANOPY_SHARED_DIR`` points the lookup
elsewhere; ``.ci/run`` sets it to a path that does not exist, so the suite is proved to pass
without the folder, then runs only the ``shared_data`` tests with it present.
"""

from pathlib import Path

import pytest

from tests import SHARED as SHARED_DIR

#: Marks a test that reads the shared folder (``pytest -m shared_data`` runs only those).
needs_shared = pytest.mark.shared_data


def shared_path(*parts: str) -> Path:
    """The path under the shared folder, or skip the calling test saying it is absent."""
    path = SHARED_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not present beside this checkout (a fresh clone has no "
                    "../shared); the test reads that external file")
    return path


def shared_files(folder: str, pattern: str) -> list[Path]:
    """The shared folder's files matching ``pattern`` (none on a fresh clone)."""
    path = SHARED_DIR / folder
    return sorted(path.glob(pattern)) if path.is_dir() else []


def shared_params(folder: str, pattern: str) -> list:
    """:func:`shared_files` as test parameters; on a fresh clone one parameter that skips
    with the folder's path as its reason (an empty list would skip saying only that the
    parameter set is empty)."""
    files = shared_files(folder, pattern)
    if files:
        return files
    return [pytest.param(SHARED_DIR / folder, marks=pytest.mark.skip(reason=(
        f"{SHARED_DIR / folder} is not present beside this checkout (a fresh clone has no "
        "../shared); the test reads its files")))]
