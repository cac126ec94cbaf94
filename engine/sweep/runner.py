"""Running a sweep: points in parallel, a time limit each, rows appended as they finish.

``local`` runs up to ``workers`` points at once, each an engine job in its own process
(:mod:`canopy.engine.process.child_jobs`), killed when it passes the spec's ``time_limit``. ``ray``
sends the same points to a Ray cluster (``ray.init(address=...)``, or a local Ray
instance without an address) as remote tasks, cancelled at the time limit; Ray is an
optional extra (``pip install 'canopy-collectives[ray]'``).

Rows go to a CSV file as each point finishes, so a crash loses at most the points still
running; a sweep started again skips every point whose ``key`` is already in the file.
With pyarrow installed, the finished table is also written as Parquet beside the CSV.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from canopy.engine.model.errors import CanopyError
from canopy.engine.process.child_jobs import ChildJob
from canopy.engine.sweep.point import base_row, evaluate
from canopy.engine.sweep.spec import Point, Spec

EXECUTORS = ("local", "ray")
Row = dict[str, Any]


def done_keys(path: str | os.PathLike[str]) -> set[str]:
    """Keys of the points whose rows are already in the CSV file (none if no file)."""
    p = Path(path)
    if not p.exists():
        return set()
    with open(p, newline="", encoding="utf-8") as f:
        return {row["key"] for row in csv.DictReader(f) if row.get("key")}


def read_rows(path: str | os.PathLike[str]) -> list[Row]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class _Table:
    """The CSV output: rows appended one by one; new columns rewrite the file once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = read_rows(path) if path.exists() else []
        self.columns: list[str] = list(self.rows[0]) if self.rows else []

    def add(self, row: Row) -> None:
        self.rows.append(row)
        new = [c for c in row if c not in self.columns]
        if new or not self.path.exists():
            self.columns += new
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, self.columns, restval="")
                writer.writeheader()
                writer.writerows(self.rows)
            os.replace(tmp, self.path)
        else:
            with open(self.path, "a", newline="", encoding="utf-8") as f:
                csv.DictWriter(f, self.columns, restval="").writerow(row)

    def write_parquet(self) -> Path | None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            return None
        out = self.path.with_suffix(".parquet")
        table = pa.table({c: [str(r.get(c, "")) for r in self.rows] for c in self.columns})
        pq.write_table(table, out)
        return out


def _timed_out(point: Point, limit: float) -> Row:
    return {**base_row(point), "error": f"the point took longer than the time limit of "
                                        f"{limit:g} s and was stopped."}


def _run_local(spec: Spec, points: list[Point], workers: int,
               finished: Callable[[Row], None]) -> None:
    waiting = list(points)
    running: dict[ChildJob, tuple[Point, float]] = {}
    while waiting or running:
        while waiting and len(running) < workers:
            point = waiting.pop(0)
            job = ChildJob(evaluate, point, spec.algorithms, spec.sizes)
            job.start()
            running[job] = (point, time.monotonic())
        for job, (point, started) in list(running.items()):
            for event in job.events():
                if event[0] == "done":
                    finished(event[1])
                elif event[0] in ("failed", "crashed"):
                    finished({**base_row(point), "error": event[1]})
            if not job.ended and time.monotonic() - started > spec.time_limit:
                job.cancel()
                finished(_timed_out(point, spec.time_limit))
            if job.ended:
                del running[job]
        time.sleep(0.02)


def _run_ray(spec: Spec, points: list[Point], address: str | None,
             finished: Callable[[Row], None]) -> None:
    try:
        import ray
    except ImportError:
        raise CanopyError("the ray executor needs Ray: pip install "
                          "'canopy-collectives[ray]'.") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        remote = ray.remote(evaluate)
        refs = {remote.remote(p, spec.algorithms, spec.sizes): (p, time.monotonic())
                for p in points}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                point, _ = refs.pop(ref)
                try:
                    finished(ray.get(ref))
                except Exception as exc:  # a task that died: its row says so
                    finished({**base_row(point), "error": f"the Ray task failed "
                                                          f"({exc.__class__.__name__})."})
            for ref, (point, started) in list(refs.items()):
                if time.monotonic() - started > spec.time_limit:
                    ray.cancel(ref, force=True)
                    del refs[ref]
                    finished(_timed_out(point, spec.time_limit))
    finally:
        if started_here:
            ray.shutdown()


def run_sweep(spec: Spec, output: str | os.PathLike[str], executor: str = "local",
              address: str | None = None, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[Row]:
    """Evaluate the points of ``spec`` not yet in ``output``; return every row.

    ``progress(done, total)`` is called as points finish (counting those skipped).
    """
    if executor not in EXECUTORS:
        raise CanopyError(f"unknown executor '{executor}'; use {' or '.join(EXECUTORS)}.")
    path = Path(output)
    table = _Table(path)
    skip = done_keys(path)
    todo = [p for p in spec.points if p.key not in skip]
    total, done = len(spec.points), len(spec.points) - len(todo)
    if progress is not None:
        progress(done, total)

    def finished(row: Row) -> None:
        nonlocal done
        table.add(row)
        done += 1
        if progress is not None:
            progress(done, total)

    if todo:
        if executor == "local":
            _run_local(spec, todo, workers or os.cpu_count() or 1, finished)
        else:
            _run_ray(spec, todo, address, finished)
    table.write_parquet()
    return table.rows

