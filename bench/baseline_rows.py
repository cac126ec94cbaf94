"""CPU seconds of the baselines' rows of ``canopy compare`` (each row's synthesis and its
simulation at the four default sizes), per baseline and collective; prints JSON.

Topologies: h100-4x8 and h100-8x8 (``canopy generate cluster --servers 4|8 --gpus 8
--gpu-bw 450 --nic-bw 50 --scale-out leaf-spine``: 32 and 64 GPUs). ForestColl's row
runs without its layout choice (that phase is timed by bench/delivery.py and is not a
baseline's). Each case runs in a child process of its own, as the command would, with
the command's collector settings; per row the CPU seconds (``time.process_time``) from
its start to the next row's, and a digest of every row's JSON (bounds, times, pieces,
stages, details): the same digest, the same printed table.

``--tree DIR`` times another checkout of the project (say ``git archive main | tar -x -C
/tmp/main``), imported in place of this one, for A/B runs; ``--rounds N`` alternates the
trees N times (the machine may be shared) and keeps each row's least CPU time.

Run: .venv/bin/python -m bench.baseline_rows [--tree DIR] [--rounds N]
         [allgather,reduce-scatter,allreduce] [h100-4x8,h100-8x8]
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SERVERS = {"h100-4x8": 4, "h100-8x8": 8}
BASELINES = ("ring", "blink", "tacos")


def child(tree: str, topology: str, collective: str) -> dict:
    """One comparison in this process, importing ``canopy`` from ``tree``."""
    if Path(tree).resolve() != HERE:
        # the editable install maps canopy.engine etc. to folders: map them to the tree
        mappings = [getattr(sys.modules.get(getattr(f, "__module__", "")), "MAPPING", None)
                    for f in sys.meta_path]
        mapping = next((m for m in mappings if m and "canopy.engine" in m), None)
        if mapping is None:
            raise SystemExit("--tree needs canopy installed editable (pip install -e .)")
        for name, path in list(mapping.items()):
            mapping[name] = path.replace(str(HERE), str(Path(tree).resolve()))
    from canopy.engine.comparison import table
    from canopy.engine.generators import generate
    assert Path(table.__file__).resolve().is_relative_to(Path(tree).resolve())
    from canopy.engine.process.gc_tuning import batch_collector
    batch_collector()
    topo = generate("cluster", {"servers": SERVERS[topology], "gpus": 8, "gpu_bw": 450,
                                "nic_bw": 50, "scale_out": "leaf-spine"})
    forestcoll = table._forestcoll
    table._forestcoll = lambda t, c, r, limits=None, lay_out=True: forestcoll(t, c, r, limits,
                                                                           False)
    rows: dict[str, float] = {}
    last: list = [None, 0.0]

    def progress(phase: str, _: float) -> None:
        if phase != last[0]:
            now = time.process_time()
            if last[0] is not None:
                rows[last[0]] = now - last[1]
            last[:] = [phase, now]

    comp = table.compare(topo, collective, progress=progress)
    digest = hashlib.sha1(json.dumps(comp.to_json()["rows"], sort_keys=True).encode())
    return {"rows": {name: rows[name] for name in BASELINES if name in rows},
            "digest": digest.hexdigest()[:12]}


def main(args: list[str]) -> None:
    if "--child" in args:
        tree, topology, collective = args[args.index("--child") + 1:][:3]
        print(json.dumps(child(tree, topology, collective)))
        return
    trees = [str(HERE)]
    if "--tree" in args:
        trees.insert(0, args[args.index("--tree") + 1])
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 1
    plain = [a for i, a in enumerate(args) if not a.startswith("--")
             and (i == 0 or args[i - 1] not in ("--tree", "--rounds"))]
    collectives = plain[0].split(",") if plain else ["allgather", "reduce-scatter",
                                                     "allreduce"]
    topologies = plain[1].split(",") if len(plain) > 1 else list(SERVERS)
    best: dict[tuple[str, str, str], dict] = {}
    for _ in range(rounds):
        for topology in topologies:
            for collective in collectives:
                for tree in trees:
                    out = subprocess.run([sys.executable, __file__, "--child", tree,
                                          topology, collective],
                                         capture_output=True, text=True, check=True)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    kept = best.setdefault((tree, topology, collective), row)
                    for name, cpu in row["rows"].items():
                        kept["rows"][name] = min(kept["rows"][name], cpu)
                    if kept["digest"] != row["digest"]:
                        raise SystemExit(f"{tree}: rows differ between rounds")
    results = [{"tree": tree, "topology": topology, "collective": collective,
                "baselines_cpu_s": round(sum(row["rows"].values()), 2),
                **{name: round(cpu, 2) for name, cpu in row["rows"].items()},
                "digest": row["digest"]}
               for (tree, topology, collective), row in best.items()]
    print(json.dumps({"benchmark": "baseline_rows", "rounds": rounds, "results": results},
                     indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
