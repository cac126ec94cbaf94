"""Contention analysis at scale: 1024 GPUs on a leaf-spine, 8 jobs, 100 ECMP seeds.

The fabric: 128 servers of 8 GPUs (NVSwitch inside, one 25 GB/s NIC per GPU), 4 servers
per top-of-rack leaf (32 leaves), 32 spines, one 25 GB/s port between every leaf and
spine (non-blocking). Job k (128 GPUs, ring allreduce of 256 MiB) runs on servers k,
k+8, k+16, ... so its traffic crosses the spines. Prints JSON with CPU seconds
(time.process_time) per phase and routing; the target is <= 30 s for ECMP, 100 seeds.

Then the shape of vClos (Han et al., arXiv:2308.05692) Fig. 2 ("the larger the cluster, the more
flows contend"):
on leaf-spines of L leaves x L spines with L GPUs per leaf, every GPU sends one flow to
the GPU half the cluster away; per scale, the share of flows whose leaf uplink carries
1, 2, 3, ... flows, over the seeds.

    python bench/fabric.py [--seeds 100]
"""

import argparse
import json
import time

from canopy.engine.fabric.analysis import analyze
from canopy.engine.fabric.ecmp import EcmpRouter, five_tuple_hash
from canopy.engine.generators import generate
from canopy.engine.model.plan import path_links
from canopy.engine.model.workloads import Job


def fabric():
    topo = generate("cluster", {"servers": "128", "gpus": "8", "scale_out": "leaf-spine",
                                "leaf": "tor", "servers_per_leaf": "4", "spines": "32"})
    gpus = topo.compute_nodes()
    servers = [gpus[8 * s:8 * s + 8] for s in range(128)]
    topo.jobs = [Job(f"job{k}", tuple(g for s in range(k, 128, 8) for g in servers[s]),
                     "allreduce", "ring", 256 << 20) for k in range(8)]
    return topo


def contention_by_scale(seeds):
    """Share of flows by how many flows their leaf uplink carries (Fig. 2's shape)."""
    out = {}
    for leaves in (2, 4, 8, 16, 32):
        topo = generate("cluster", {"servers": str(leaves * leaves), "gpus": "1",
                                    "scale_out": "leaf-spine", "leaf": "tor",
                                    "servers_per_leaf": str(leaves),
                                    "spines": str(leaves)})
        router = EcmpRouter(topo)
        gpus = topo.compute_nodes()
        half = len(gpus) // 2
        flows = []
        for i, g in enumerate(gpus):
            j = (i + half) % len(gpus)
            flows.append((g, gpus[j], five_tuple_hash(i + 1, j + 1, 49152 + i)))
        shares: dict[int, int] = {}
        for seed in range(seeds):
            uplink = {}
            for src, dst, h in flows:
                path = router.path(src, dst, h, seed)
                hop = next(link for link in path_links(path) if link[1].startswith("spine"))
                uplink.setdefault(hop, []).append(src)
            for users in uplink.values():
                shares[len(users)] = shares.get(len(users), 0) + len(users)
        total = sum(shares.values())
        out[f"{len(gpus)} GPUs"] = {k: round(v / total, 4) for k, v in sorted(shares.items())}
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    start = time.process_time()
    topo = fabric()
    out = {"gpus": len(topo.compute_nodes()), "nodes": len(topo.nodes),
           "links": len(topo.links), "jobs": len(topo.jobs), "seeds": args.seeds,
           "build_cpu_s": round(time.process_time() - start, 3)}
    for routing in ("ecmp", "source", "vclos"):
        phases: dict[str, float] = {}
        last = [time.process_time(), None]

        def progress(phase, fraction, phases=phases, last=last):
            now = time.process_time()
            if last[1] is not None:
                phases[last[1]] = phases.get(last[1], 0.0) + now - last[0]
            last[0], last[1] = now, phase

        begin = time.process_time()
        result = analyze(topo, routing=routing, seeds=args.seeds, progress=progress)
        total = time.process_time() - begin
        out[routing] = {
            "cpu_s": round(total, 3),
            "plans_computed": result.plans_computed,
            "cpu_s_by_phase": {k: round(v, 3) for k, v in phases.items()},
            "slowdown_mean": [round(j.mean, 3) for j in result.jobs if j.mean is not None],
            "slowdown_p99": [round(j.p99, 3) for j in result.jobs if j.p99 is not None],
            "alone_us": sorted({round(j.alone_us, 1) for j in result.jobs
                                if j.alone_us is not None}),
            "refused": sum(j.refused is not None for j in result.jobs),
            "max_link_load": round(max(max(k.loads) for k in result.links), 3),
        }
    begin = time.process_time()
    out["flows_per_uplink_share"] = contention_by_scale(args.seeds)
    out["flows_per_uplink_cpu_s"] = round(time.process_time() - begin, 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
