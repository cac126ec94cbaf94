"""check-xml against compare: the exported XML's own simulated algbw beside compare's
ForestColl figure, per sample and collective; print JSON.

For each sample and collective: the layout the default export took, compare's ForestColl
algbw at the size, the XML's (``canopy check-xml --topology``, loop iterations picked as
compare picks pipeline depths), their ratio, and CPU seconds for compare, export and the
XML's simulation.
Run: ``python bench/msccl_timing.py [--size 1G] [--sample NAME] [--collective C]``.
"""

import argparse
import json
import time

from canopy.engine.comparison import compare
from canopy.engine.forest import solve
from canopy.engine.msccl import MscclLimitError, MscclOptions, build_layout, msccl_xml
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.msccl.timing import fastest_xml
from canopy.engine.optimality import COLLECTIVES
from canopy.engine.sizes import parse_size
from canopy.engine.topology_io import load_sample, sample_names

LAYOUTS = ("pipelined", "per-tree", "mixed", "compact")


def layout_taken(schedule) -> str:
    """The first layout of ``auto``'s order that fits (what the default export wrote)."""
    for layout in LAYOUTS:
        try:
            build_layout(schedule, options=MscclOptions(layout=layout))
        except MscclLimitError:
            continue
        return layout
    return "none"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--sample", action="append", help="only this sample (repeatable)")
    parser.add_argument("--collective", action="append", choices=COLLECTIVES)
    args = parser.parse_args()
    size = parse_size(args.size)
    rows = []
    for name in sample_names():
        if args.sample and name.removesuffix(".json") not in args.sample:
            continue
        topo = load_sample(name)
        for collective in args.collective or COLLECTIVES:
            schedule = solve(topo, collective)
            start = time.process_time()
            expected = compare(topo, collective, sizes=(size,), algorithms=()).rows[0]
            expected_algbw = expected.algbw_at(size)
            compared = time.process_time()
            data = msccl_xml(schedule)
            exported = time.process_time()
            timing = fastest_xml(read_msccl_bytes(data), topo, size)
            timed = time.process_time()
            rows.append({
                "sample": name.removesuffix(".json"), "collective": collective,
                "k": schedule.k, "layout": layout_taken(schedule),
                "compare_algbw": round(float(expected_algbw), 3),
                "xml_algbw": round(float(timing.algbw), 3),
                "ratio": round(float(timing.algbw / expected_algbw), 4),
                "iterations": timing.iterations,
                "compare_cpu_s": round(compared - start, 3),
                "export_cpu_s": round(exported - compared, 3),
                "xml_cpu_s": round(timed - exported, 3)})
    print(json.dumps({"size": size, "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
