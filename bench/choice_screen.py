"""The runtime choice with and without its screen-out rule (layouts behind the fastest at
the first depth run no deeper, ``_Screen.screened_out`` in
:mod:`canopy.engine.deploy.runtime_choice`):
per sample and collective, the layout each chooses, the chosen layout's algbw at 1 GiB
as a fraction of the optimum (both choices' layouts timed in full by
:func:`~canopy.engine.execution.simulate.fastest`, as ``canopy compare`` times them),
what each chose for messages below 512 MiB, and the CPU seconds of each choice; print
JSON.

Each case runs in its own child process per mode, so neither choice reuses the other's
simulations. Cases: every bundled sample, allgather, reduce-scatter and allreduce, and
the 32- and 64-GPU rail leaf-spines of ``canopy generate cluster --gpus 8 --gpu-bw 450
--nic-bw 50 --scale-out leaf-spine``.
Run: ``python bench/choice_screen.py [CASE ...]``.
"""

import json
import subprocess
import sys
import time

COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")
CLUSTERS = {"h100-4x8": 4, "h100-8x8": 8}


def _topology(case: str):
    from canopy.engine.generators import generate
    from canopy.engine.io.topology_json import load_sample

    if case in CLUSTERS:
        return generate("cluster", {"servers": CLUSTERS[case], "gpus": 8, "gpu_bw": 450,
                                    "nic_bw": 50, "scale_out": "leaf-spine"})
    return load_sample(case)


def _child(case: str, collective: str, screen: bool) -> dict:
    """One choice in this process: its layout, fraction, smaller messages' layout, CPU s."""
    from canopy.engine.deploy import runtime_choice
    from canopy.engine.execution.simulate import fastest
    from canopy.engine.forestcoll.solve import solve

    topology = _topology(case)
    schedule = solve(topology, collective)
    if not screen:
        runtime_choice._Screen.screened_out = lambda self: set()
    start = time.process_time()
    choice = runtime_choice.runtime_schedule(topology, schedule)
    cpu = time.process_time() - start
    executed = fastest(topology, choice.plan, runtime_choice.REFERENCE_SIZE).algbw
    return {"k": choice.schedule.k, "layout": choice.layout,
            "fraction": round(float(executed / choice.optimum), 5),
            "below": choice.below.layout if choice.below is not None else None,
            "deep_runs": sum(1 for c in choice.candidates if "executed_fraction" in c),
            "choice_cpu_s": round(cpu, 2)}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(sys.argv[2], sys.argv[3], sys.argv[4] == "screen")))
        return
    from canopy.engine.io.topology_json import sample_names

    cases = sys.argv[1:] or [*(s for s in sample_names() if s.endswith(".json")), *CLUSTERS]
    rows = []
    for case in cases:
        for collective in COLLECTIVES:
            row: dict = {"case": case, "collective": collective}
            for mode in ("screen", "all"):
                out = subprocess.run([sys.executable, __file__, "--child", case, collective,
                                      mode], capture_output=True, text=True)
                row[mode] = json.loads(out.stdout) if out.returncode == 0 else {
                    "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    same = [r for r in rows if "error" not in r["screen"] and "error" not in r["all"]]
    print(json.dumps({
        "rows": rows,
        "same_layout": sum(r["screen"]["layout"] == r["all"]["layout"] for r in same),
        "compared": len(same),
        "largest_loss": max((r["all"]["fraction"] - r["screen"]["fraction"] for r in same),
                            default=0),
        "choice_cpu_s": {"screen": round(sum(r["screen"]["choice_cpu_s"] for r in same), 2),
                         "all": round(sum(r["all"]["choice_cpu_s"] for r in same), 2)},
    }, indent=1))


if __name__ == "__main__":
    main()
