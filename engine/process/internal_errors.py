"""One sentence for people, the traceback in the log file, for internal errors (bugs).

The command line (exit code 70) and the editor's exception hook call
:func:`report_internal_error`; engine jobs in child processes do the same through
:mod:`canopy.engine.process.child_jobs`, whose :func:`~canopy.engine.process.child_jobs.log_file`
is the one log file
(``$CANOPY_LOG``, else ``~/.local/state/canopy/canopy.log``). Tracebacks never reach the
terminal or a dialog.
"""

from __future__ import annotations


def report_internal_error(context: str, error: BaseException) -> str:
    """Log ``error`` with its traceback; return one sentence naming the log file."""
    # Imported here: multiprocessing and logging would cost every command's start-up.
    from canopy.engine.process.child_jobs import log_file, log_internal_error

    summary = f"{error.__class__.__name__}: {error}".strip().rstrip(":")
    if len(summary) > 200:
        summary = summary[:200] + "…"
    try:
        path = log_file()
        log_internal_error(error, path)
    except OSError as exc:
        return (f"internal error in {context} ({summary}); the log file could not be "
                f"written ({exc.strerror or exc}).")
    return (f"internal error in {context} ({summary}); this is a bug in Canopy, the "
            f"traceback is in {path}.")
