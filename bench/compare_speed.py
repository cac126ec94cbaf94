"""CPU seconds of `canopy compare` (issue 16's targets: <= 2 s at 64 GPUs with the default
sizes, finishing within 2 min at 1024 GPUs), per collective, with the time per row.

Cases: the 2 x DGX A100 sample, 8 x DGX A100 (64 GPUs, ``canopy generate cluster
--servers 8``) and, with ``--large``, 128 x DGX A100 (1024 GPUs). CPU seconds are
``time.process_time`` of the whole comparison (solve, baselines, simulation); the rows'
seconds are wall clock. Prints JSON.

``--no-numba`` times the default install (the simulator's event loop as Python, as
without the ``fast`` extra) even where numba is installed. Each row also gives the
sends the simulator executed (``sends``; identical servers run folded, one send per
orbit).

Run: .venv/bin/python bench/compare_speed.py [--large] [--no-numba]
         [allgather,reduce-scatter,allreduce]
"""

import json
import sys
import time

if "--no-numba" in sys.argv:
    sys.modules["numba"] = None   # type: ignore[assignment]  # import numba fails

from canopy.engine import simulate as sim
from canopy.engine.comparison import compare
from canopy.engine.generators import generate
from canopy.engine.topology_io import load_sample

SENDS: list[int] = []
_simulate = sim.simulate


def counted(*args, **kwargs):
    """simulate, adding the sends it executed to SENDS."""
    result = _simulate(*args, **kwargs)
    SENDS.append(result.messages)
    return result


sim.simulate = counted      # fastest() calls the module's simulate


def cases(large: bool) -> list[tuple[str, object]]:
    found = [("dgx-a100-2x8.json", load_sample("dgx-a100-2x8.json")),
             ("8 x DGX A100 (64 GPUs)", generate("cluster", {"servers": "8"}))]
    if large:
        found.append(("128 x DGX A100 (1024 GPUs)", generate("cluster", {"servers": "128"})))
    return found


def main(args: list[str]) -> None:
    collectives = next((a.split(",") for a in args if not a.startswith("--")), ["allgather"])
    results = []
    for name, topo in cases("--large" in args):
        for collective in collectives:
            SENDS.clear()
            start = time.process_time()
            comp = compare(topo, collective)
            row = {"topology": name, "collective": collective,
                   "cpu_seconds": round(time.process_time() - start, 2),
                   "numba": "--no-numba" not in args,
                   "sends": sum(SENDS),
                   "rows": {r.algorithm: {"wall_seconds": round(r.seconds, 2),
                                          "pieces": {str(s): p for s, p in r.pieces.items()}}
                            for r in comp.rows if r.reason is None}}
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "compare_speed", "results": results}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
