"""Peak memory of the MSCCL++ timing walk by phase; print JSON.

A plan file (written by ``canopy solve --mscclpp`` or, with ``--alltoall SAMPLE``, the
sample's MCF all-to-all plan, cached at ``--plan``) is walked for ``--iterations`` loop
iterations as :func:`canopy.engine.mscclpp.timing.time_plan` walks each of its runs: the
walk (:meth:`_Builder.build`), the sends as the event loop takes them (``flat``) and the
event loop (``run_flat``). Each phase's peak resident memory is read from the kernel
(``VmHWM``, reset between phases through ``/proc/self/clear_refs``; the plan as read is
part of each), beside the bytes of the walk's own arrays at its end, per send, and CPU
seconds.
Run: ``python bench/mscclpp_walk_memory.py --plan PLAN.json [--alltoall SAMPLE]
[--iterations 24]``.
"""

import argparse
import json
import os
import time
from array import array
from fractions import Fraction

from canopy.engine.execution.kernel import run_flat
from canopy.engine.execution.program import DEFAULT_LATENCY_US
from canopy.engine.io.topology_json import load_sample
from canopy.engine.mscclpp.reader import read_plan_bytes
from canopy.engine.mscclpp.timing import _Builder

SIZE = 1 << 30


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    raise KeyError(field)


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--alltoall", help="write this sample's all-to-all plan if absent")
    parser.add_argument("--topology", help="sample the plan runs on (default: --alltoall)")
    parser.add_argument("--iterations", type=int, default=24)
    args = parser.parse_args()
    topo = load_sample(args.topology or args.alltoall)
    if not os.path.exists(args.plan):
        from canopy.engine.alltoall import solve_alltoall
        from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
        file = alltoall_plan(args.plan, topo, solve_alltoall(topo).schedule)
        with open(args.plan, "wb") as f:
            f.write(file.data)
    with open(args.plan, "rb") as f:
        plan = read_plan_bytes(f.read(), args.plan)
    out = {"plan": os.path.basename(args.plan), "iterations": args.iterations,
           "plan_read_rss_mib": status_mib("VmRSS")}
    reset_peak()
    start = time.process_time()
    walk = _Builder(plan, topo, Fraction(SIZE), args.iterations).build()
    walked = time.process_time()
    sends = len(walk.conn)
    arrays = {name: value.itemsize * len(value) for name, value in vars(walk).items()
              if isinstance(value, array)}
    out.update({"sends": sends, "walk_cpu_s": round(walked - start, 1),
                "walk_peak_mib": status_mib("VmHWM"),
                "walk_arrays_mib": round(sum(arrays.values()) / 2**20, 1),
                "walk_array_bytes_per_send": {k: round(v / sends, 1)
                                              for k, v in sorted(arrays.items())}})
    reset_peak()
    flat = walk.flat()
    del walk                 # as time_plan's runs: the walk is let go once flattened
    out["flat_peak_mib"] = status_mib("VmHWM")
    reset_peak()
    start = time.process_time()
    time_us = run_flat(topo, flat, DEFAULT_LATENCY_US, False, None, None)
    out.update({"event_loop_cpu_s": round(time.process_time() - start, 1),
                "event_loop_peak_mib": status_mib("VmHWM"), "time_us": round(float(time_us), 3)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
