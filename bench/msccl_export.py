"""Export every sample's default schedule as MSCCL XML and check it; print JSON.

For each sample, collective and buffer mode: CPU seconds to export and to check (the rules
of :mod:`canopy.engine.msccl.checks` and the symbolic run of
:mod:`canopy.engine.msccl.executor`), the size of the program (steps, thread blocks,
channels, bytes) and the share of fused steps.
Run: ``python bench/msccl_export.py [--channels C] [--sample NAME] [--collective C]``.
"""

import argparse
import json
import time

from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.msccl import MscclOptions, msccl_xml, schedule_threadblocks
from canopy.engine.msccl.executor import simulate_bytes


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--channels", type=int, default=MscclOptions.channels)
    parser.add_argument("--sample", action="append", help="only this sample (repeatable)")
    parser.add_argument("--collective", action="append", choices=COLLECTIVES,
                        help="only this collective (repeatable)")
    args = parser.parse_args()
    rows = []
    for name in sample_names():
        if args.sample and name.removesuffix(".json") not in args.sample:
            continue
        topo = load_sample(name)
        for collective in args.collective or COLLECTIVES:
            schedule = solve(topo, collective)
            for inplace in (True, False):
                options = MscclOptions(inplace=inplace, channels=args.channels)
                start = time.process_time()
                data = msccl_xml(schedule, options=options)
                exported = time.process_time()
                report = simulate_bytes(data)
                simulated = time.process_time()
                assignment = schedule_threadblocks(schedule, options=options)
                steps = [s for tbs in assignment.tbs for tb in tbs for s in tb.steps]
                fused = sum(1 for s in steps if s.recv_peer >= 0 and s.send_peer >= 0)
                rows.append({
                    "sample": name.removesuffix(".json"), "collective": collective,
                    "inplace": inplace, "ngpus": report.ngpus, "k": schedule.k,
                    "export_cpu_s": round(exported - start, 4),
                    "check_cpu_s": round(simulated - exported, 4),
                    "steps": report.steps, "fused_steps": fused,
                    "threadblocks_max_per_gpu": report.max_threadblocks,
                    "channels": report.channels, "messages": report.messages,
                    "xml_bytes": len(data)})
    print(json.dumps({"channels": args.channels, "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
