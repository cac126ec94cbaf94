"""``canopy verify TOPO SCHEDULE``: re-check a schedule file against its topology."""

from __future__ import annotations

import argparse

from canopy.engine.io.schedule_json import load_schedule
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.topology import format_gbps
from canopy.engine.model.verification import verify


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="verify a canopy-schedule against a topology")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("schedule", help="canopy-schedule JSON file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topo = load_topology(args.topology)
    schedule = load_schedule(args.schedule)
    try:
        achieved = verify(topo, schedule)
    except ScheduleError as exc:
        raise ScheduleError(f"{args.schedule}: {exc}") from None
    print(f"OK: {len(schedule.trees)} trees, {schedule.collective} algbw "
          f"{format_gbps(achieved)} GB/s verified")
    return 0
