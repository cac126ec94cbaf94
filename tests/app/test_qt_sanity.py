"""Guards against Qt binding releases that break a long-running editor."""

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    ping = Signal(str, float)


def test_signal_emit_keeps_reference_counts(qapp):
    # PySide6 6.12.0 drops a reference to True on every emit; on Python 3.11 the
    # interpreter aborts once True's count reaches zero (a solve emits thousands).
    emitter = _Emitter()
    before = sys.getrefcount(True)
    for _ in range(5000):
        emitter.ping.emit("phase", 0.5)
    assert abs(sys.getrefcount(True) - before) < 100
