"""Engine jobs for the editor: results, errors, crashes and an immediate cancel."""

import sys
import time

from bench.clusters import dgx_a100_cluster
from canopy.app import job_runner
from canopy.app.job_runner import EngineJob
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from tests import job_targets


def test_job_delivers_schedule_and_progress(qtbot):
    job = EngineJob(solve, load_sample("dgx-a100-2x8"))
    phases = []
    job.progress.connect(lambda phase, fraction: phases.append(phase))
    with qtbot.waitSignal(job.finished, timeout=30000) as blocker:
        job.start()
    assert blocker.args[0].k == 13
    assert phases[0] == "optimum" and "tree packing" in phases and phases[-1] == "verification"


def test_job_reports_engine_errors_in_one_sentence(qtbot):
    job = EngineJob(job_targets.unbalanced)
    with qtbot.waitSignal(job.failed, timeout=30000) as blocker:
        job.start()
    assert blocker.args == ["x.json: node 'a' is unbalanced."]


def test_engine_bug_goes_to_the_log_not_the_window(qtbot, tmp_path, monkeypatch):
    log = tmp_path / "canopy.log"
    monkeypatch.setenv("CANOPY_LOG", str(log))
    job = EngineJob(job_targets.buggy)
    with qtbot.waitSignal(job.failed, timeout=30000) as blocker:
        job.start()
    assert blocker.args[0] == f"internal error (ZeroDivisionError); the traceback is in {log}."
    assert "Traceback" in log.read_text() and "ZeroDivisionError" in log.read_text()


def test_cancel_stops_a_long_solve_at_once_without_process_wide_tweaks(qtbot):
    before = sys.getswitchinterval()
    job = EngineJob(job_targets.solve_forever, dgx_a100_cluster(16))
    seen = []
    job.progress.connect(lambda phase, fraction: seen.append(phase))
    job.start()
    qtbot.waitUntil(lambda: "tree packing" in seen, timeout=60000)
    assert job.is_running()
    assert sys.getswitchinterval() == before
    start = time.perf_counter()
    with qtbot.waitSignal(job.cancelled, timeout=1000):
        job.cancel()
    assert time.perf_counter() - start < 0.5
    assert not job.is_running()


def test_a_job_deleted_with_its_window_mid_run_ends_its_child_without_a_crash(qtbot):
    """A closing window deletes its jobs while their reader threads are passing events on
    (that race once crashed the whole process): the child ends, the reader stops."""
    from PySide6.QtCore import QObject
    from shiboken6 import delete

    window = QObject()
    job = EngineJob(solve, dgx_a100_cluster(16), parent=window)
    engine_job = job._job
    seen = []
    job.progress.connect(lambda phase, fraction: seen.append(phase))
    job.start()
    qtbot.waitUntil(lambda: "tree packing" in seen, timeout=60000)
    delete(window)              # progress events keep arriving meanwhile
    qtbot.waitUntil(lambda: engine_job.ended, timeout=3000)
    qtbot.wait(50)              # queued events for the deleted job are dropped
    assert job._key not in job_runner._dispatcher().jobs


def test_a_job_nobody_holds_lives_until_its_reader_ends(qtbot):
    """The dispatcher keeps a started job alive, so its result still arrives after the
    starter dropped it; the registration ends with the reader, so nothing accumulates."""
    import gc

    results = []
    job = EngineJob(solve, load_sample("dgx-a100-2x8"))
    job.finished.connect(results.append)
    key = job._key
    job.start()
    del job
    gc.collect()
    qtbot.waitUntil(lambda: bool(results), timeout=30000)
    assert results[0].k == 13
    qtbot.waitUntil(lambda: key not in job_runner._dispatcher().jobs, timeout=3000)


def test_a_large_result_is_read_in_turns_with_the_event_loop(qtbot, monkeypatch):
    """Between pickle frames of a large call or result the reader thread waits for the
    event loop's turn (the loop sets the event it is sent), so the two do not fight over
    the interpreter lock; the result arrives whole."""
    from fractions import Fraction

    turns = []
    real = job_runner._turn

    def counted(ask):
        turns.append(1)
        real(ask)
    monkeypatch.setattr(job_runner, "_turn", counted)
    value = [(f"gpu{i}", Fraction(i, 7), tuple(range(i % 50))) for i in range(20_000)]
    job = EngineJob(job_targets.echo, value)
    with qtbot.waitSignal(job.finished, timeout=30000) as blocker:
        job.start()
    assert blocker.args[0] == value
    assert len(turns) >= 2 * 20   # both ways: about 1.3 MB, 64 KiB a frame


def test_a_reader_that_outlives_the_dispatcher_ends_quietly():
    """As the editor quits the interpreter deletes the dispatcher while a reader thread
    may still be running: its emits then do nothing, and it waits for no turn."""
    def deleted(*args):
        raise RuntimeError("Signal source has been deleted")

    emitted = []
    job = job_runner.ChildJob(job_targets.count_to, 10**6)
    job_runner._read(job, lambda event: job_runner._while_alive(deleted, 7, event),
                     lambda: True,
                     lambda: job_runner._turn(lambda done: job_runner._while_alive(deleted, done)))
    assert job.ended
    assert job_runner._while_alive(lambda *args: emitted.append(args), 7, None)
    assert emitted == [(7, None)]


def _holds_a_qt_object(value, depth=0):
    """Whether ``value`` (a callable, partial, closure or plain value) reaches a QObject."""
    import functools

    from PySide6.QtCore import QObject
    if isinstance(value, QObject) or isinstance(getattr(value, "__self__", None), QObject):
        return True
    if depth > 3:
        return False
    inner = []
    if isinstance(value, functools.partial):
        inner = [value.func, *value.args]
    cells = getattr(value, "__closure__", None) or ()
    inner += [c.cell_contents for c in cells]
    return any(_holds_a_qt_object(v, depth + 1) for v in inner)


def test_the_reader_thread_holds_no_qt_object_of_the_job(qtbot):
    """The reader thread must not own a reference to the job's wrapper: freeing it there
    as the thread ends touches a Qt object from the wrong thread."""
    import threading

    job = EngineJob(job_targets.unbalanced)
    with qtbot.waitSignal(job.failed, timeout=30000):
        job.start()
        args = next(t._args for t in threading.enumerate()
                    if t.name == "engine-job" and getattr(t, "_args", (None,))[0] is job._job)
    assert not any(_holds_a_qt_object(a) for a in args[1:])


def test_the_reader_thread_decodes_with_the_collector_paused(qtbot):
    """A collector pass on the reader thread would free the GUI thread's cyclic garbage
    (Qt objects among them) there: the reader decodes and emits with the collector
    paused (overlapping pauses of two readers counted), so none starts from its
    allocations."""
    import gc
    import threading

    from canopy.app.heap import collector_paused

    passes = []

    def seen(phase, info):
        if phase == "start":
            passes.append(threading.current_thread().name)

    def events():
        for _ in range(3):
            yield ("progress", "optimum", [[i] for i in range(job_runner.LARGE_EVENT_OBJECTS)])

    def read():
        with collector_paused():
            while job_runner._decoded(it) is not None:
                pass

    it = events()
    gc.callbacks.append(seen)
    try:
        with collector_paused():                 # a second reader, ending first
            reader = threading.Thread(target=read, name="engine-job")
            reader.start()
        reader.join()
    finally:
        gc.callbacks.remove(seen)
    assert "engine-job" not in passes and gc.isenabled()
