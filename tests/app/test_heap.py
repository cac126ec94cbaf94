"""The editor's full collector passes at idle moments (:mod:`canopy.app.heap`)."""

import gc
import weakref

import pytest

from canopy.app import heap


@pytest.fixture
def collector(qapp):
    """An IdleCollector whose own timer is stopped (the test drives check() itself),
    with CPython's own full passes off, as settle_start_up() leaves them."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], heap.NEVER)
    made = heap.IdleCollector()
    made._timer.stop()
    yield made
    made.deleteLater()
    gc.set_threshold(*thresholds)


def _make_middle_passes(n):
    for _ in range(n):
        gc.collect(1)


def test_a_due_full_pass_waits_until_the_gui_thread_is_idle(collector):
    _make_middle_passes(heap.FULL_PASS_DUE)
    full = gc.get_stats()[2]["collections"]
    assert not collector.check(0.0, 5.0)          # no second of history yet
    assert not collector.check(0.5, 5.2)
    assert not collector.check(1.0, 5.4)          # 0.4 s of CPU in the last second: busy
    assert gc.get_stats()[2]["collections"] == full
    assert collector.check(2.0, 5.41)             # 10 ms in the last second: idle
    assert gc.get_stats()[2]["collections"] == full + 1 and collector.passes == 1
    assert gc.get_count()[2] == 0
    assert not collector.check(3.0, 5.41)         # nothing due any more


def test_nothing_due_means_no_pass_and_the_backstop_ignores_business(collector):
    gc.collect()
    assert not collector.check(0.0, 0.0) and not collector.check(2.0, 0.0)
    _make_middle_passes(heap.BACKSTOP)
    assert collector.check(2.25, 0.5)             # busy, but far past due
    assert collector.passes == 1


def test_a_garbage_cycle_is_collected_once_idle(collector):
    class Node:
        """An object the collector follows, holding a reference to another."""

    _make_middle_passes(heap.FULL_PASS_DUE)
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.collect(1)                                 # the cycle reaches the oldest generation
    del a, b
    _make_middle_passes(heap.FULL_PASS_DUE)       # which only full passes walk
    assert gone() is not None
    collector.check(0.0, 1.0)
    assert collector.check(1.5, 1.0)
    assert gone() is None
