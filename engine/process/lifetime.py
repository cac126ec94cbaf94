"""Engine jobs die with the process that started them.

A child process computing for an editor or a command that is gone (killed with SIGKILL,
its terminal closed) would compute on, unseen, for minutes. :func:`die_with_parent`,
called first thing in every child, makes that impossible: on Linux the kernel sends the
child SIGKILL when its parent ends (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon
thread notices that the child was handed to another parent and ends it. Children come
from a fork server (:mod:`canopy.engine.process.child_jobs`) whose parent is the editor or command;
the fork server ends when that process's end closes its pipe, and its children follow.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1
POLL_SECONDS = 0.5


def die_with_parent(parent: int | None = None) -> str:
    """Make this process end when its parent does; how ('prctl', 'thread' or
    'gone' when the parent had already ended, in which case this process ends)."""
    parent = os.getppid() if parent is None else parent
    how = "thread"
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                how = "prctl"
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:      # it ended before the signal was asked for
        os._exit(1)
    if how == "thread":
        def watch() -> None:
            while os.getppid() == parent:
                threading.Event().wait(POLL_SECONDS)
            os._exit(1)
        threading.Thread(target=watch, name="canopy-parent-watch", daemon=True).start()
    return how
