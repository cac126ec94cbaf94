"""The runtime choice's MSCCL++ fit check (:func:`canopy.engine.deploy.runtime_choice.plan_fits`):
its CPU seconds per layout, and its verdicts on every sample's layouts; print JSON.

Timing: every layout (:func:`canopy.engine.msccl.connections.iter_layouts`) of the
schedule's plan is checked once, alone (time.process_time, the collector set as the
``canopy`` command sets it), on three cases: allgather and allreduce on a 64-GPU cluster
(``canopy generate cluster --servers 8 --gpus 8 --gpu-bw 450 --nic-bw 50 --scale-out
leaf-spine``) and mi250-2x16's allreduce at k = 2 (some of whose layouts do not fit). Run
it with PYTHONPATH naming a folder whose ``canopy`` is a checkout of another commit to
compare.

``--choice`` times the checks where :func:`runtime_schedule` asks them instead (the
choice's own objects alive, as in ``canopy compare``), and the whole choice.

Verdicts: ``--golden PATH`` writes :func:`fit_record` of every layout of every sample
(up to 64 GPUs) for allgather, reduce-scatter and allreduce at the optimal k and k = 2;
``--verify PATH`` checks them against such a file (tests/data/fit_verdicts.json holds the
records the check gave before it was made faster; the suite checks a few of them).
Run: ``python bench/fit_check.py [--case NAME] [--choice | --golden PATH | --verify PATH]``.
"""

import argparse
import hashlib
import json
import os
import sys
import time

from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.deploy.runtime_choice import plan_fits
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclLimitError, MscclLimits, MscclOptions
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.writer import plan_algo
from canopy.engine.mscclpp.files import rank_servers
from canopy.engine.mscclpp.writer import MscclppLimitError, check_fits
from canopy.engine.process.gc_tuning import batch_collector

COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")
MOST_GPUS = 64


def cluster64():
    return generate("cluster", {"servers": 8, "gpus": 8, "gpu_bw": 450, "nic_bw": 50,
                                "scale_out": "leaf-spine"})


CASES = {"cluster-64 allgather": (cluster64, "allgather", None),
         "cluster-64 allreduce": (cluster64, "allreduce", None),
         "mi250-2x16 allreduce k=2": (lambda: load_sample("mi250-2x16"), "allreduce", 2)}


def sample_layouts(topology, collective, k):
    """(k the schedule runs, layout name, laid-out plan) of every layout of the schedule
    :func:`best_schedule` gives (``k`` None: the optimal one)."""
    schedule = best_schedule(topology, collective, k=k)
    for name, laid in iter_layouts(schedule_plan(schedule), MscclLimits(), topology):
        yield schedule.k, name, laid


def fit_record(topology, k, laid, limits=MscclLimits()):
    """What the fit check decides of a layout and what it counts: ``plan_fits``'s answer,
    the MSCCL program's thread blocks per GPU and a digest of the whole program (or the
    MSCCL limit it breaks), and the MSCCL++ verdict (``fits`` or the limit it breaks)."""
    record = {"fits": plan_fits(topology, k, laid, limits)}
    try:
        algo = plan_algo(laid, k, MscclOptions(inplace=True, limits=limits, layout="auto"),
                         routes=False)
    except MscclLimitError as error:
        return {**record, "msccl": str(error)}
    record["threadblocks"] = [len(gpu.tbs) for gpu in algo.gpus]
    record["program"] = hashlib.sha256(repr(algo).encode()).hexdigest()[:16]
    try:
        check_fits(algo, rank_servers(topology), limits.max_tbs_per_gpu)
        record["mscclpp"] = "fits"
    except MscclppLimitError as error:
        record["mscclpp"] = str(error)
    return record


def every_sample():
    """(sample, collective, asked k, k, layout, laid-out plan, topology) of every sample."""
    for sample in sample_names():
        topology = load_sample(sample)
        if len(topology.compute_nodes()) > MOST_GPUS:
            continue
        for collective in COLLECTIVES:
            for asked in (None, 2):
                for k, name, laid in sample_layouts(topology, collective, asked):
                    yield sample, collective, asked, k, name, laid, topology


def record_key(sample, collective, asked, name):
    return f"{sample} {collective} k={asked or 'optimal'} {name}"


def golden(path):
    records = {record_key(s, c, a, name): {"k": k, **fit_record(topology, k, laid)}
               for s, c, a, k, name, laid, topology in every_sample()}
    with open(path, "w") as f:       # a layout a line
        f.write("{\n" + ",\n".join(f"{json.dumps(key)}: {json.dumps(records[key], sort_keys=True)}"
                                    for key in sorted(records)) + "\n}\n")
    return {"written": path, "layouts": len(records)}


def verify(path):
    with open(path) as f:
        want = json.load(f)
    seen, differ = 0, []
    for s, c, a, k, name, laid, topology in every_sample():
        key = record_key(s, c, a, name)
        seen += 1
        if want.get(key) != {"k": k, **fit_record(topology, k, laid)}:
            differ.append(key)
    return {"layouts": seen, "recorded": len(want), "differ": differ}


def time_case(name):
    make, collective, k = CASES[name]
    topology = make()
    limits = MscclLimits()
    cpu, verdicts = [], []
    for chunks, _, laid in sample_layouts(topology, collective, k):
        start = time.process_time()
        verdicts.append(plan_fits(topology, chunks, laid, limits))
        cpu.append(time.process_time() - start)
    return {"case": name, "layouts": len(cpu), "fit": sum(verdicts),
            "cpu_s_per_layout": round(sum(cpu) / len(cpu), 3),
            "cpu_s_each": [round(c, 3) for c in cpu]}


def time_choice(name):
    """plan_fits' CPU seconds where the runtime choice asks it (among the choice's own
    objects, which the collector walks too), and the choice's."""
    from canopy.engine.deploy import runtime_choice

    make, collective, k = CASES[name]
    topology = make()
    schedule = best_schedule(topology, collective, k=k)
    real, cpu = runtime_choice.plan_fits, []

    def timed(*args):
        start = time.process_time()
        try:
            return real(*args)
        finally:
            cpu.append(time.process_time() - start)

    runtime_choice.plan_fits = timed
    try:
        start = time.process_time()
        choice = runtime_choice.runtime_schedule(topology, schedule)
        total = time.process_time() - start
    finally:
        runtime_choice.plan_fits = real
    return {"case": name, "checks": len(cpu), "layout": choice.layout,
            "cpu_s_per_check": round(sum(cpu) / max(1, len(cpu)), 3),
            "checks_cpu_s": round(sum(cpu), 2), "choice_cpu_s": round(total, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--golden")
    parser.add_argument("--verify")
    parser.add_argument("--choice", action="store_true",
                        help="time the checks inside runtime_schedule instead")
    args = parser.parse_args()
    batch_collector()           # as the canopy command runs
    import canopy.engine
    out = {"canopy": os.path.dirname(os.path.dirname(canopy.engine.__file__))}
    if args.golden:
        out.update(golden(args.golden))
    elif args.verify:
        out.update(verify(args.verify))
    else:
        timer = time_choice if args.choice else time_case
        out["cases"] = [timer(name) for name in args.case or CASES]
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
