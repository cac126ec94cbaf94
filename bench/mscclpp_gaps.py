"""Why tpu-v4-4x4x4-torus's all-to-all and allreduce plans run below compare (the two rows of
bench/mscclpp_timing.py under 95 %); print JSON.

all-to-all: the busiest link's time per iteration in the plan (one iteration walked, its
sends over their routes) against the MCF row's, the range over all links, and the lowering's
chunks per pair and share error; the plan's algbw, its MSCCL program's in the MSCCL XML
model at the plan's iterations, and the plan's with no thread block cut into parts (a
what-if: the runtime's limit of 64 ops per thread block lifted). allreduce: the runtime
choice's MSCCL program in the MSCCL XML model (the plan's time is that program's) at the
plan's iterations and at compare's depth, the same program with its receiving thread
blocks' receives unordered (each waits for its own message and dependency only), the
program whose nodes add their children's data shallow first (no ``accumulation``, as
before the choice ordered them by arrival), and compare's plan model at both depths.
Run: ``python bench/mscclpp_gaps.py [--collective alltoall|allreduce]``.
"""

import argparse
import inspect
import json
import textwrap
import time
from collections import defaultdict
from dataclasses import replace
from fractions import Fraction

from canopy.engine.execution.program import BYTES_PER_US_PER_GBPS, algbw_gbps
from canopy.engine.execution.simulate import fastest, simulate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import path_links

SAMPLE = "tpu-v4-4x4x4-torus"
SIZE = 1 << 30


def alltoall(topo):
    from canopy.engine.alltoall import solve_alltoall
    from canopy.engine.alltoall.compare import mcf_plan
    from canopy.engine.alltoall.msccl import alltoall_xml, chunking
    from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
    from canopy.engine.msccl import timing
    from canopy.engine.msccl.reader import read_msccl_bytes
    from canopy.engine.mscclpp.reader import read_plan_bytes
    from canopy.engine.mscclpp.timing import _Builder, iterations, time_plan

    result = solve_alltoall(topo)
    row = fastest(topo, mcf_plan(result), SIZE)
    chunks, _, error = chunking(result.schedule)
    file = alltoall_plan("plan.json", topo, result.schedule)
    plan = read_plan_bytes(file.data)
    count = iterations(plan, Fraction(SIZE))
    xml_run = timing.time_xml(read_msccl_bytes(alltoall_xml(result.schedule).data), topo,
                              SIZE, count)
    uncut = uncut_plan(topo, result.schedule, file.unit_size)
    program = _Builder(plan, topo, Fraction(SIZE), 1).build().sends()
    loads = defaultdict(Fraction)
    for send in program.sends:
        for link in path_links(program.connections[send.connection].route):
            loads[link] += send.size
    caps = topo.capacities()
    us = {link: load / (caps[link] * BYTES_PER_US_PER_GBPS) for link, load in loads.items()}
    busiest = max(us, key=lambda link: (us[link], link))
    return {"mcf_algbw": round(float(algbw_gbps(SIZE, row.time_us)), 3),
            "mcf_us_per_iteration": round(float(row.time_us) / count, 3),
            "chunks_per_pair": chunks, "share_error": round(error, 4),
            "plan_iterations": count, "links": len(us),
            "plan_link_us_per_iteration": {"least": round(float(min(us.values())), 3),
                                           "most": round(float(us[busiest]), 3)},
            "busiest_link": list(busiest),
            "plan_floor_algbw": round(float(algbw_gbps(SIZE, us[busiest] * count)), 3),
            "plan_algbw": round(float(time_plan(plan, topo, SIZE).algbw), 3),
            "plan_threadblocks_per_gpu": max(len(g.tbs) for g in plan.gpus),
            "program_algbw": round(float(xml_run.algbw), 3),
            "uncut_plan_algbw": round(float(time_plan(uncut, topo, SIZE).algbw), 3),
            "uncut_threadblocks_per_gpu": max(len(g.tbs) for g in uncut.gpus)}


def uncut_plan(topo, schedule, unit):
    """The all-to-all plan at pipeline unit ``unit`` with no thread block cut into parts
    (a what-if: the writer's and the reader's 64 ops per thread block lifted)."""
    from canopy.engine.alltoall import mscclpp_plan
    from canopy.engine.mscclpp import reader, writer

    saved = (writer.MAX_OPERATION, reader.MAX_OPERATION, mscclpp_plan.unit_for)
    writer.MAX_OPERATION = reader.MAX_OPERATION = 1 << 20
    mscclpp_plan.unit_for = lambda algo, topology, size: unit
    try:
        return reader.read_plan_bytes(mscclpp_plan.alltoall_plan("uncut.json", topo,
                                                                 schedule).data)
    finally:
        writer.MAX_OPERATION, reader.MAX_OPERATION, mscclpp_plan.unit_for = saved


def unordered_receives(timing):
    """The MSCCL XML model with a receiving thread block's steps not chained to the steps
    before them (a what-if: the runtime runs them in order)."""
    src = textwrap.dedent(inspect.getsource(timing._Builder._wait))
    chained = "need = list(last_done[key])"
    assert chained in src
    space = dict(vars(timing))
    exec(src.replace(chained, f"{chained} if tb.send >= 0 else []"), space)  # noqa: S102

    class Unordered(timing._Builder):
        _wait = space["_wait"]
    return Unordered


def allreduce(topo):
    from canopy.engine.allreduce.lp_schedule import choose_allreduce
    from canopy.engine.deploy.mscclpp_export import fitting_algo
    from canopy.engine.deploy.runtime_choice import export_choice
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.msccl import MscclLimits, timing
    from canopy.engine.mscclpp.files import rank_servers

    choice = export_choice(topo, choose_allreduce(topo, solve(topo, "allreduce")),
                           MscclLimits())
    algo = fitting_algo(choice, True, MscclLimits(), rank_servers(topo))
    best = timing.fastest_xml(algo, topo, SIZE)
    deep = fastest(topo, choice.plan, SIZE)
    out = {"layout": choice.layout, "program_iterations": best.iterations,
           "compare_pieces": deep.pieces,
           "compare_algbw": round(float(algbw_gbps(SIZE, deep.time_us)), 3),
           "compare_algbw_at_program_iterations": round(float(algbw_gbps(
               SIZE, simulate(topo, choice.plan, SIZE, pieces=best.iterations).time_us)), 3),
           "program_algbw": round(float(best.algbw), 3),
           "program_algbw_at_compare_pieces": round(float(
               timing.time_xml(algo, topo, SIZE, deep.pieces).algbw), 3)}
    shallow = replace(choice, plan=replace(choice.plan, reduce_trees=tuple(
        replace(t, accumulation=()) for t in choice.plan.reduce_trees)))
    out["accumulation"] = any(t.accumulation for t in choice.plan.reduce_trees)
    out["program_shallow_first_algbw"] = round(float(timing.time_xml(
        fitting_algo(shallow, True, MscclLimits(), rank_servers(topo)), topo, SIZE,
        best.iterations).algbw), 3)
    ordered = timing._Builder
    timing._Builder = unordered_receives(timing)
    try:
        out["program_unordered_receives_algbw"] = round(float(
            timing.time_xml(algo, topo, SIZE, best.iterations).algbw), 3)
    finally:
        timing._Builder = ordered
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--collective", action="append", choices=("alltoall", "allreduce"))
    args = parser.parse_args()
    topo = load_sample(SAMPLE)
    out = {"sample": SAMPLE, "size": SIZE}
    for name in args.collective or ("alltoall", "allreduce"):
        start = time.process_time()
        out[name] = {"alltoall": alltoall, "allreduce": allreduce}[name](topo)
        out[name]["cpu_s"] = round(time.process_time() - start, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
