"""Engine jobs die with the process that started them.

A child process computing for an editor or a command that is gone (killed with SIGKILL,
its terminal closed) would compute on, unseen, for minutes. :func:`die_with_parent`,
called first thing in every child, makes that impossible: on Linux the kernel sends the
child SIGKILL when its parent ends (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon
thread notices that the child was handed to another parent and ends it. Children come
from a fork server (:mod:`canopy.engine.process.child_jobs`) whose parent is the editor or command;
the fork server ends when that process's end closes its pipe, and its children follow.

That pipe is multiprocessing's "alive" pipe, whose writing end every child of the fork
server is handed too: a child that kept it would keep the fork server waiting for it,
and the fork server would keep it computing (its death signal waits for the fork
server's end). :func:`forget_fork_server` closes the child's copy. While the fork server
imports the engine (seconds on a busy machine) it reads no pipe:
:func:`fork_server_dies_with_parent` covers that stretch.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from typing import Any

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
        ParentWatch(parent)
    return how


class ParentWatch:
    """A daemon thread that ends this process once it is no longer ``parent``'s child
    (its parent ended), until :meth:`stop`."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="canopy-parent-watch",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            if os.getppid() != self.parent:
                os._exit(1)

    def stop(self) -> None:
        """End the watch (its thread is gone when this returns)."""
        self._stop.set()
        self._thread.join()


def fork_server_dies_with_parent(from_main_thread: bool) -> ParentWatch | None:
    """Called by the fork server as it starts: it ends when its parent does.

    Linux's death signal is tied to the thread that started a process, not to the
    process, so it is asked for only when the fork server was started from its parent's
    main thread (the editor starts it so, as does every command); a fork server started
    from another thread (a reader thread that ends with its job) would otherwise take
    every later job down with that thread. Then, and where the signal does not exist, a
    thread watches the parent while the engine loads; the watch returned is to be
    stopped once loading is done, when the fork server's loop notices its parent's end by
    itself, so that no thread is left running in a process that forks."""
    parent = os.getppid()
    if from_main_thread and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:
                    os._exit(1)
                return None
        except (OSError, AttributeError):
            pass
    return ParentWatch(parent)


def forget_fork_server() -> None:
    """Close this fork-server child's copy of the fork server's "alive" pipe (see the
    module's docstring): the fork server can then end with its parent, and this process
    with it. Nothing in a process that is not a fork server's child."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver   # multiprocessing's private state: no types
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None and getattr(server, "_forkserver_pid", None) is None:  # not a client
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None
