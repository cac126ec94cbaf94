"""CPU seconds and peak memory of `canopy compare` (targets: <= 2 s at 64 GPUs with the
default sizes, finishing within 2 min at 1024 GPUs), per collective, with a phase split.

Cases: the 2 x DGX A100 sample, 8 x DGX A100 (64 GPUs, ``canopy generate cluster
--servers 8``) and, with ``--large``, 128 x DGX A100 (1024 GPUs). Each case runs in its
own child process, as the command does (with its collector settings,
:mod:`canopy.engine.process.gc_tuning`), so ``cpu_seconds`` (``time.process_time`` at the
end) includes start-up (imports) and ``peak_mb`` (ru_maxrss) is the case's own. Phases
(CPU s): ``import`` (the engine's modules), ``topology`` (load or generate), per row its
``build`` (ForestColl: solve and connection layout; a baseline: its synthesis) and its
``simulate`` (every message size). Prints JSON.

``--no-numba`` times the default install (the simulator's event loop as Python, as
without the ``fast`` extra) even where numba is installed. Each row also gives the
sends the simulator executed (``sends``; identical servers run folded, one send per
orbit).

Run: .venv/bin/python bench/compare_speed.py [--large] [--no-numba]
         [allgather,reduce-scatter,allreduce]
"""

import json
import os
import resource
import subprocess
import sys
import time

CASES = {"dgx-a100-2x8.json": None, "8 x DGX A100 (64 GPUs)": 8,
         "128 x DGX A100 (1024 GPUs)": 128}


def child(name: str, collective: str, no_numba: bool) -> dict:
    """One ``compare`` run in this process, as ``canopy compare`` runs it."""
    if no_numba:
        sys.modules["numba"] = None   # type: ignore[assignment]  # import numba fails
    from canopy.engine.comparison import table as comparison
    from canopy.engine.execution import simulate as sim
    from canopy.engine.generators import generate
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.process.gc_tuning import batch_collector
    batch_collector()               # as the canopy command does once it has started
    imported = time.process_time()
    servers = CASES[name]
    topo = load_sample(name) if servers is None else \
        generate("cluster", {"servers": str(servers)})
    loaded = time.process_time()
    sends: list[int] = []
    simulating = [0.0]
    _simulate, _fastest = sim.simulate, comparison.fastest

    def counted(*args, **kwargs):
        result = _simulate(*args, **kwargs)
        sends.append(result.messages)
        return result

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return _fastest(*args, **kwargs)
        finally:
            simulating[0] += time.process_time() - start

    sim.simulate = counted          # fastest() calls the module's simulate
    comparison.fastest = timed
    rows = {}
    last = [time.process_time(), 0.0]

    def progress(phase: str, fraction: float) -> None:
        """At each row's start: close the previous row's phases."""
        if phase in rows:
            return
        now = time.process_time()
        if rows:
            previous = rows[next(reversed(rows))]
            previous["simulate"] = round(simulating[0] - last[1], 2)
            previous["build"] = round(now - last[0] - previous["simulate"], 2)
        last[:] = [now, simulating[0]]
        if phase != "done":
            rows[phase] = {}

    comp = comparison.compare(topo, collective, progress=progress)
    for r in comp.rows:
        rows[r.algorithm].update(
            {"wall_seconds": round(r.seconds, 2),
             **({"pieces": {str(s): p for s, p in r.pieces.items()}} if r.reason is None
                else {"omitted" if r.omitted else "not_applicable": r.reason})})
    return {"topology": name, "collective": collective,
            "cpu_seconds": round(time.process_time(), 2),
            "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "numba": not no_numba, "sends": sum(sends),
            "phases": {"import": round(imported, 2), "topology": round(loaded - imported, 2)},
            "rows": rows}


def main(args: list[str]) -> None:
    if "--child" in args:
        name, collective = args[args.index("--child") + 1:args.index("--child") + 3]
        print(json.dumps(child(name, collective, "--no-numba" in args)))
        return
    collectives = next((a.split(",") for a in args if not a.startswith("--")), ["allgather"])
    names = list(CASES) if "--large" in args else list(CASES)[:2]
    results = []
    for name in names:
        for collective in collectives:
            start = time.perf_counter()
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                                  collective, *(a for a in args if a == "--no-numba")],
                                 capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["wall_seconds"] = round(time.perf_counter() - start, 2)
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "compare_speed", "results": results}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
