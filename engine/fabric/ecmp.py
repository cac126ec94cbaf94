"""ECMP: every switch hashes a flow's 5-tuple onto one of its equal-cost next hops.

vClos (Han et al., arXiv:2308.05692) §3.1: switches spread flows over equal-cost paths by hashing
the 5-tuple
(source IP, destination IP, source port, destination port, protocol); flows that hash
onto the same uplink collide. We model it per hop, as switches do: at every node on the
way, the next hops are the neighbours one hop closer to the destination (shortest paths
with switch interiors, as :class:`~canopy.engine.network.routing.Router` routes), and the switch
picks ``hash(5-tuple, seed, switch) mod (number of next hops)``.

The hash is a deterministic 64-bit mixer (the splitmix64 finaliser) of the 5-tuple, the
seed and the switch's index, so a seed stands for one hash configuration of the whole
fabric (per-switch salts avoid hash polarisation) and runs are reproducible. A flow's
5-tuple: IPs are node indices, the source port is derived from its job and channel (a
RoCE queue pair's UDP source port), destination port 4791 (RoCE v2), protocol 17 (UDP).

Limit: a next hop is a neighbour, so parallel links (or one link standing for a bundle
of ports) between two switches are one next hop whose bandwidth the flows share; real
switches hash onto each port, which collides more. Model such fabrics with one spine
per port (as samples/leaf-spine-jobs.json does) to see port-level collisions.
"""

from __future__ import annotations

import zlib

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from canopy.engine.model.plan import Path
from canopy.engine.model.topology import Topology

MASK = (1 << 64) - 1
ROCE_PORT = 4791
UDP = 17


def mix64(x: int) -> int:
    """splitmix64's finaliser: a bijective, well-mixed 64-bit hash of ``x``."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & MASK
    return x ^ (x >> 31)


def five_tuple_hash(src_ip: int, dst_ip: int, src_port: int, dst_port: int = ROCE_PORT,
                    protocol: int = UDP) -> int:
    """A 64-bit hash of a 5-tuple (the switch's hash input)."""
    return mix64(mix64((src_ip << 32) | dst_ip) ^ ((src_port << 24) | (dst_port << 8)
                                                    | protocol))


def source_port(job: str, channel: str, src: str, dst: str) -> int:
    """The UDP source port of a connection: deterministic, in the dynamic range."""
    return 49152 + zlib.crc32(f"{job}|{channel}|{src}|{dst}".encode()) % 16384


class EcmpRouter:
    """Per-hop ECMP next hops over the live links of ``topology``."""

    def __init__(self, topology: Topology) -> None:
        caps = topology.capacities()
        self.index = {n: i for i, n in enumerate(topology.node_ids())}
        self.switch = list(topology.switch_nodes())
        self.switch_pos = {s: i for i, s in enumerate(self.switch)}
        self.out: dict[str, list[str]] = {n: [] for n in self.index}
        for u, v in sorted(caps, key=lambda e: (self.index[e[0]], self.index[e[1]])):
            self.out[u].append(v)
        rows = [self.switch_pos[u] for u, v in caps
                if u in self.switch_pos and v in self.switch_pos]
        cols = [self.switch_pos[v] for u, v in caps
                if u in self.switch_pos and v in self.switch_pos]
        n = len(self.switch)
        graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        # hops[a, b]: switch-only hop count from switch a to switch b.
        self.hops = shortest_path(graph, unweighted=True) if n else np.zeros((0, 0))
        self._to: dict[str, np.ndarray] = {}
        self._next: dict[tuple[str, str], list[str]] = {}

    def _distance_to(self, dst: str) -> np.ndarray:
        """Per switch, hops to ``dst`` through switches only (inf if none)."""
        if dst not in self._to:
            entries = [self.switch_pos[u] for u in self.switch if dst in self.out[u]]
            if entries:
                self._to[dst] = self.hops[:, entries].min(axis=1) + 1
            else:
                self._to[dst] = np.full(len(self.switch), np.inf)
        return self._to[dst]

    def next_hops(self, node: str, dst: str) -> list[str]:
        """The neighbours of ``node`` on shortest switch-interior routes to ``dst``."""
        key = (node, dst)
        if key not in self._next:
            dist = self._distance_to(dst)
            options = self.out[node]
            if dst in options:
                found = [dst]
            else:
                scored = [(dist[self.switch_pos[v]], v) for v in options
                          if v in self.switch_pos]
                best = min((d for d, _ in scored), default=np.inf)
                found = [v for d, v in scored if d == best] if best < np.inf else []
            self._next[key] = found
        return self._next[key]

    def has_choice(self, src: str, dst: str) -> bool | None:
        """Whether some hop of src -> dst has several next hops (None: no switch route)."""
        node = src
        while node != dst:
            options = self.next_hops(node, dst)
            if not options:
                return None
            if len(options) > 1:
                return True
            node = options[0]
        return False

    def flow_hash(self, job: str, channel: str, src: str, dst: str) -> int:
        """The 5-tuple hash of a job's connection src -> dst on ``channel``."""
        return five_tuple_hash(self.index[src] + 1, self.index[dst] + 1,
                               source_port(job, channel, src, dst))

    def path(self, src: str, dst: str, flow_hash: int, seed: int) -> Path:
        """The route a flow with 5-tuple hash ``flow_hash`` takes under ``seed``."""
        path = [src]
        node = src
        salt = mix64(seed * 0x9E3779B97F4A7C15 & MASK)
        while node != dst:
            options = self.next_hops(node, dst)
            if len(options) == 1:
                node = options[0]
            else:
                pick = mix64(flow_hash ^ salt ^ mix64(self.index[node] + 1)) % len(options)
                node = options[pick]
            path.append(node)
        return tuple(path)
