"""The MSCCL++ timing walk against an earlier revision of it: the same sends, sizes, waits,
lists and chain depths, and the same times; print a line per case and exit non-zero on any
difference.

For each case (``SAMPLE:COLLECTIVE``, or ``torus=DIMS:COLLECTIVE`` for a generated torus;
the plan ``bench/mscclpp_timing.py`` exports, MCF's for ``alltoall``) the walk of
:mod:`canopy.engine.mscclpp.timing` and the reference revision's walk are run at each loop
count and their arrays compared entry for entry (each send's connection, size, the sends
it waits for, its waits and chain depth, and every connection's route); then
``time_plan`` of both at each size, compared exactly (time, iterations, connections,
sends). CPU seconds of both walks are printed beside each count.
Run: ``python bench/mscclpp_walk_check.py --reference REV [--counts 2,16,64]
[--sizes 16M,1G] [--plans DIR] [CASE ...]``; ``--plans`` keeps exported plans there
between runs.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

from canopy.engine.allreduce.lp_schedule import choose_allreduce
from canopy.engine.alltoall import solve_alltoall
from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
from canopy.engine.deploy.mscclpp_export import schedule_plans
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.sizes import parse_size
from canopy.engine.mscclpp import timing
from canopy.engine.mscclpp.reader import read_plan_bytes

CASES = ("forestcoll-fig2:allreduce", "forestcoll-fig2:alltoall", "hypercube-3d:allgather",
         "hypercube-3d:alltoall", "mesh-2d-3x3:allreduce", "mesh-2d-3x3:alltoall",
         "aws-p4d-2x8:reduce-scatter", "dgx-a100-2x8:allreduce", "dgx-a100-2x8:alltoall",
         "mi250-8plus8:allreduce", "mi250-8plus8:reduce-scatter", "mi250-8plus8:alltoall",
         "tacos-dragonfly-4x5:allreduce", "torus=4x4:alltoall")


def revision_module(rev, source, name, folder):
    """The module at ``source`` as of git revision ``rev``, loaded as ``name``, or None
    where that revision has no such file."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shown = subprocess.run(["git", "-C", root, "show", f"{rev}:{source}"],
                           capture_output=True, text=True)
    if shown.returncode:
        return None
    path = os.path.join(folder, name + ".py")
    with open(path, "w") as f:
        f.write(shown.stdout)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def reference(rev):
    """The timing module as of git revision ``rev``, asking that revision's compiled
    search where it has one (its arguments change with the walk's arrays)."""
    folder = tempfile.mkdtemp()
    module = revision_module(rev, "engine/mscclpp/timing.py", "timing_reference", folder)
    kernel = revision_module(rev, "engine/mscclpp/reach_kernel.py", "reach_kernel_reference",
                             folder)
    if kernel is not None and hasattr(module, "compiled_reached"):
        module.compiled_reached = kernel.compiled_reached
    return module


def topology_of(name):
    if name.startswith("torus="):
        return generate("torus", {"dims": name.removeprefix("torus=")})
    return load_sample(name + ".json")


def plan_of(case, topo, plans):
    """The case's plan, exported (or read from ``plans`` where an earlier run kept it)."""
    path = plans and os.path.join(plans, case.replace(":", "-").replace("=", "_") + ".json")
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return read_plan_bytes(f.read())
    collective = case.split(":")[1]
    if collective == "alltoall":
        file = alltoall_plan("plan.json", topo, solve_alltoall(topo).schedule)
    else:
        file = schedule_plans("plan.json", topo,
                              choose_allreduce(topo, solve(topo, collective)))[-1]
    if path:
        with open(path, "wb") as f:
            f.write(file.data)
    return read_plan_bytes(file.data)


def arrays(builder):
    """The walk's output, as lists to compare."""
    n = len(builder.conn)
    ptr, wptr = builder.after_ptr, builder.wait_ptr
    return {"conn": list(builder.conn), "amount_of": list(builder.amount_of),
            "amounts": list(builder.amounts), "depth": list(builder.depth),
            "after": [list(builder.after[ptr[s]:ptr[s + 1]]) for s in range(n)],
            "waits": [list(builder.waits[wptr[s]:wptr[s + 1]]) for s in range(n)],
            "routes": [c.route for c in builder.program.connections]}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference", required=True, help="git revision to compare with")
    parser.add_argument("--counts", default="2,16,64")
    parser.add_argument("--sizes", default="16M,1G")
    parser.add_argument("--plans", help="folder keeping the exported plans between runs")
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    old = reference(args.reference)
    if args.plans:
        os.makedirs(args.plans, exist_ok=True)
    differ = 0
    for case in args.cases or CASES:
        topo = topology_of(case.split(":")[0])
        plan = plan_of(case, topo, args.plans)
        for count in map(int, args.counts.split(",")):
            walks, cpu = [], []
            for module in (old, timing):
                start = time.process_time()
                builder = module._Builder(plan, topo, Fraction(1 << 30), count).build()
                cpu.append(time.process_time() - start)
                walks.append(arrays(builder))
                del builder
            bad = [k for k in walks[0] if walks[0][k] != walks[1][k]]
            differ += bool(bad)
            print(f"{case} walk of {count}: {len(walks[0]['conn'])} sends, "
                  f"{'same' if not bad else 'DIFFERENT ' + ','.join(bad)}; "
                  f"CPU s {cpu[0]:.2f} before, {cpu[1]:.2f} now", flush=True)
        for size in map(parse_size, args.sizes.split(",")):
            times = [module.time_plan(plan, topo, size) for module in (old, timing)]
            same = vars(times[0]) == vars(times[1])
            differ += not same
            print(f"{case} time at {size}: {float(times[1].time_us):.4f} µs, "
                  f"{'exact' if same else f'DIFFERENT (before {times[0]})'}", flush=True)
    print(f"{differ} differences")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
