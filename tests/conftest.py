import gc
import os

import pytest
from hypothesis import settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Property tests explore new examples on a developer's machine; in CI (CI=true) they draw
# the same examples every run, so a run that fails there fails again when re-run.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The tests (or modules) that take longest, longest first. They run first so that
# pytest-xdist, which hands the first tests out in turn, starts them on different workers at
# once instead of leaving one of them for last while the other worker idles.
LONGEST_FIRST = (
    "tests/engine/deploy/test_reduction_fill.py::test_both_passes_reach_the_rows_figure",
    "tests/test_readme.py::test_every_quick_example_runs_in_order",
    "tests/engine/comparison/test_table.py::test_forestcoll_beats_tacos_on_the_torus_of_issue_14",
    "tests/engine/sweep/test_sweep.py::test_the_same_sweep_runs_on_a_local_ray_instance",
    "tests/engine/msccl/test_connections.py::test_allreduce_on_two_mi250_servers",
    "tests/test_guard_rails.py::test_packages_type_check",
    "tests/engine/msccl/test_connections.py",
    "tests/engine/deploy/test_reduction_fill.py",
    "tests/test_readme.py",
    "tests/test_guard_rails.py",
    "tests/engine/sweep/test_sweep.py",
    "tests/cli/test_msccl_cli.py",
    "tests/engine/advise/test_advise.py",
    "tests/engine/msccl/test_writer.py",
)


def pytest_collection_modifyitems(items):
    def rank(item):
        return next((i for i, prefix in enumerate(LONGEST_FIRST)
                     if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))
    items.sort(key=rank)     # stable: the order within a module and elsewhere is kept


@pytest.fixture(autouse=True)
def _collector_as_found():
    """A test that runs the ``canopy`` command in this process (``main``) sets the collector
    up for one computation (:mod:`canopy.engine.process.gc_tuning`: start-up's objects
    frozen, young passes rare); the tests after it, the editor's above all, get the
    collector back as the process had it. (Qt's wrappers of deleted objects are garbage
    that the collector frees; kept, PySide can hand one out for a new object at the same
    address, as the editor's own process, which keeps the default collector, never does.)"""
    threshold = gc.get_threshold()
    yield
    if gc.get_threshold() != threshold:
        gc.unfreeze()
        gc.set_threshold(*threshold)
