"""Compare maxflow backends on the auxiliary networks ForestColl builds; print JSON.

Networks: the optimality test network G⃗_x (§4.2) of 2x MI250 and of 8x DGX A100, one
flow per compute node, each backend building its own graph once per round (as the
engine does). Backends: networkx preflow-push, scipy.sparse.csgraph.maximum_flow
(Dinic, int32 only), OR-Tools SimpleMaxFlow (C++ push-relabel, int64) and, when
installed, igraph (C, double capacities).
Usage: python -m bench.maxflow_backends
"""

from __future__ import annotations

import json
import time

import networkx as nx
import numpy as np
import scipy.sparse as sp
from ortools.graph.python import max_flow as ortools_max_flow
from scipy.sparse.csgraph import maximum_flow

from bench.clusters import dgx_a100_cluster
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.io.topology_json import load_sample
from canopy.engine.network.indexed import Network


def test_network(topo):
    """Arrays of G⃗_x at x = x* in integer units, plus source and sinks."""
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    y = opt.tree_bandwidth
    tails, heads, caps = [], [], []
    for (a, b), c in net.capacity.items():
        tails.append(a)
        heads.append(b)
        caps.append(int(c / y))
    for c in net.compute:
        tails.append(net.source)
        heads.append(c)
        caps.append(opt.k)
    return (net.n + 1, np.array(tails), np.array(heads), np.array(caps, dtype=np.int64),
            net.source, list(net.compute))


def run_networkx(n, tails, heads, caps, s, sinks):
    g = nx.DiGraph()
    for a, b, c in zip(tails.tolist(), heads.tolist(), caps.tolist(), strict=True):
        g.add_edge(a, b, capacity=c)
    return [nx.maximum_flow_value(g, s, t) for t in sinks]


def run_scipy(n, tails, heads, caps, s, sinks):
    m = sp.csr_matrix((caps.astype(np.int32), (tails, heads)), shape=(n, n))
    return [maximum_flow(m, s, t, method="dinic").flow_value for t in sinks]


def run_ortools(n, tails, heads, caps, s, sinks):
    solver = ortools_max_flow.SimpleMaxFlow()
    solver.add_arcs_with_capacity(tails.astype(np.int32), heads.astype(np.int32), caps)
    out = []
    for t in sinks:
        solver.solve(s, t)
        out.append(solver.optimal_flow())
    return out


def run_igraph(n, tails, heads, caps, s, sinks):
    import igraph
    g = igraph.Graph(n=n, edges=list(zip(tails.tolist(), heads.tolist(), strict=True)),
                     directed=True)
    weights = caps.tolist()
    return [int(g.maxflow_value(s, t, capacity=weights)) for t in sinks]


BACKENDS = {"networkx": run_networkx, "scipy": run_scipy, "ortools": run_ortools,
            "igraph": run_igraph}


def main() -> None:
    cases = {"2x MI250": load_sample("mi250-2x16"), "8x DGX A100": dgx_a100_cluster(8)}
    results = []
    for case, topo in cases.items():
        arrays = test_network(topo)
        reference = None
        for name, fn in BACKENDS.items():
            try:
                fn(*arrays)
            except ImportError:
                results.append({"case": case, "backend": name, "error": "not installed"})
                continue
            repeat = 1 if name == "networkx" else 10
            start = time.perf_counter()
            for _ in range(repeat):
                values = fn(*arrays)
            per_flow = (time.perf_counter() - start) / repeat / len(arrays[5])
            reference = reference or values
            results.append({"case": case, "backend": name, "nodes": arrays[0],
                            "arcs": len(arrays[1]), "us_per_flow": round(per_flow * 1e6, 1),
                            "agrees": values == reference})
    print(json.dumps({"maxflow_backends": results}, indent=1))


if __name__ == "__main__":
    main()
