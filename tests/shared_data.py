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
