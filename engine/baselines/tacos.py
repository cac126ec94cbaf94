"""TACOS: greedy link-chunk matching on a time-expanded network (TACOS (Won et al.,
arXiv:2304.05301) §IV).

* **Switch unwinding** (§IV-G): each switch (here: each connected group of switch nodes,
  e.g. NIC - IB switch - NIC) is replaced by point-to-point logical links among the N
  compute nodes attached to it: node i links to i+1, ..., i+d (mod N), d = 1 (a ring,
  for bandwidth) or d = N-1 (a full mesh, for latency). The paper leaves the order of
  the N nodes open; we alternate servers (node groups) so that a ring over a switch
  shared by several servers crosses between them at every hop. A link keeps the α of its route
  and gets 1/d of the attached bandwidth (β multiplied by d). Direct links between
  compute nodes stay as they are. We also scale a group's logical links down if routing
  them all at once would overload a physical link inside the group, so that every TACOS
  schedule is feasible on the physical network.
* **Matching** (§IV-D, Alg. 1, 2; §IV-F): time advances from event to event (a chunk
  arriving, a link freeing up). At each time the unsatisfied postconditions (node d
  still needs chunk c) are shuffled; for each, the free links into d whose source holds
  c are candidates; the cheapest (α + n/B, n the chunk size) wins, ties at random. A
  link carries one chunk at a time.
* **Reductions** (§IV-E, Fig. 11): reduce-scatter is an allgather synthesized on the
  transposed links and run backwards; allreduce is reduce-scatter then allgather.

The synthesis is repeated for ``seeds`` random seeds and the fastest kept; chunk
counts per node are a parameter (several may be tried, TACOS's time picks). The
bandwidth-only throughput is the synthesized time with α = 0 (the schedule then scales
with the message size); for allreduce the two phases' times add, as TACOS runs them one
after the other (the simulator may overlap a chunk's allgather with other chunks'
reduction and so come out slightly faster). A TACOS schedule is, per chunk, a tree: the
chunk's matches.

Check (TACOS repository tests): 5x5 mesh, 50 GiB/s and 0.5 µs links, 1 GiB allgather,
one chunk per node: 12 steps of 0.5 + 800 µs = 9606 µs.
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from canopy.engine.baselines.tacos_kernel import SHORT, STUCK, compiled_kernel, random_outputs
from canopy.engine.execution.program import DEFAULT_LATENCY_US, algbw_gbps, link_time
from canopy.engine.model.disjoint_sets import DisjointSets
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import (
    BaselineResult,
    CollectivePlan,
    Edge,
    FlowEdge,
    FlowTree,
    Path,
    add_path_load,
    loads_bound,
    path_links,
    path_loads,
)
from canopy.engine.model.topology import Topology
from canopy.engine.network.routing import Router

UNWINDINGS = ("ring", "mesh")
DEFAULT_CHUNKS = (1, 2, 4)
DEFAULT_SEEDS = 4
_WORDS = 4096          # random outputs drawn at a time (:func:`_random_words`)
SEED_WORK = 40_000     # seeds x N^2 x (sum of chunk counts) allowed by auto_seeds
COMPILE_FROM = 1_000   # deliveries from which a synthesis runs compiled (numba installed)
DRAWS_PER_DELIVERY = 8  # random outputs drawn in advance per delivery (twice the samples')


def auto_seeds(nodes: int, chunk_options: tuple[int, ...]) -> int:
    """DEFAULT_SEEDS, fewer on large topologies so a comparison stays interactive:
    seeds · N² · Σ chunk counts (the deliveries TACOS matches) stays within SEED_WORK."""
    work = nodes * nodes * sum(chunk_options)
    return max(1, min(DEFAULT_SEEDS, SEED_WORK // max(work, 1)))


@dataclass(frozen=True)
class LogicalLink:
    """A point-to-point link TACOS schedules on, with the physical route it stands for."""

    src: str
    dst: str
    bandwidth: Fraction      # GB/s
    latency: Fraction        # µs
    path: Path


class Match(NamedTuple):
    """Chunk ``chunk`` (origin, index) crosses logical link ``link`` during
    [start, end], in ticks of 1/``Timetable.unit`` µs."""

    chunk: tuple[str, int]
    link: int
    start: int
    end: int


@dataclass(frozen=True)
class Timetable:
    """A synthesized allgather: the link-chunk matches and the collective time.

    The matches are kept as columns, match i moving chunk number ``chunk[i]`` (the
    (c % chunks_per_node)-th of ``nodes[c // chunks_per_node]``) over link ``link[i]``
    during [``start[i]``, ``end[i]``]: a synthesis makes N²·chunks of them, and the
    plan's trees and link loads are read off the columns without a tuple per match
    (:attr:`matches` builds those where asked)."""

    links: tuple[LogicalLink, ...]
    nodes: tuple[str, ...]
    chunks_per_node: int
    chunk_size: Fraction
    chunk: tuple[int, ...]
    link: tuple[int, ...]
    start: tuple[int, ...]
    end: tuple[int, ...]
    unit: int                # ticks per µs
    seed: int

    @functools.cached_property
    def time(self) -> Fraction:
        """The collective time in µs (computed once: choosing chunk counts asks often)."""
        return Fraction(max(self.end, default=0), self.unit)

    @functools.cached_property
    def matches(self) -> tuple[Match, ...]:
        """The matches in the order the synthesis made them."""
        per = self.chunks_per_node
        return tuple(Match((self.nodes[c // per], c % per), li, a, b)
                     for c, li, a, b in zip(self.chunk, self.link, self.start, self.end,
                                            strict=True))


def unwind(topology: Topology, unwinding: str = "ring",
           default_latency: Fraction = DEFAULT_LATENCY_US) -> list[LogicalLink]:
    """The point-to-point logical topology TACOS runs on (§IV-G)."""
    if unwinding not in UNWINDINGS:
        raise ScheduleError(f"unknown switch unwinding '{unwinding}'; use ring or mesh.")
    caps = topology.capacities()
    lats = topology.latencies()
    compute = topology.compute_nodes()
    cset = set(compute)
    order = {n: i for i, n in enumerate(topology.node_ids())}
    links: list[LogicalLink] = []
    for (u, v), cap in sorted(caps.items(), key=lambda e: (order[e[0][0]], order[e[0][1]])):
        if u in cset and v in cset:
            links.append(LogicalLink(u, v, cap, lats.get((u, v), default_latency), (u, v)))

    router = Router(topology)
    group_of = {node.id: node.group or "" for node in topology.nodes}
    groups = sorted((sorted(g, key=order.__getitem__) for g in _switch_groups(topology, caps)),
                    key=lambda g: order[g[0]])
    for group in groups:
        members = frozenset(group)
        up = {c: Fraction(0) for c in compute}       # bandwidth into and out of the group
        down = dict(up)
        for (u, v), bw in caps.items():
            if u in up and v in members:
                up[u] += bw
            elif v in down and u in members:
                down[v] += bw
        attached = _interleave([c for c in compute if up[c] or down[c]], group_of)
        n = len(attached)
        if n < 2:
            continue
        degree = 1 if unwinding == "ring" else n - 1
        loads: dict[tuple[str, str], Fraction] = {}
        made: list[LogicalLink] = []
        for i, a in enumerate(attached):
            for step in range(1, degree + 1):
                b = attached[(i + step) % n]
                bandwidth = min(up[a], down[b]) / degree
                path = router.route(a, b, loads, bandwidth, through=members)
                if not bandwidth or path is None:
                    continue
                add_path_load(loads, path, bandwidth)
                latency = sum((lats.get(e, default_latency) for e in path_links(path)),
                              Fraction(0))
                made.append(LogicalLink(a, b, bandwidth, latency, path))
        over = max((load / caps[e] for e, load in loads.items()), default=Fraction(1))
        scale = max(Fraction(1), over)
        links += [LogicalLink(x.src, x.dst, x.bandwidth / scale, x.latency, x.path)
                  for x in made]
    return links


def _switch_groups(topology: Topology, caps: dict[tuple[str, str], Fraction]
                   ) -> list[set[str]]:
    """The connected groups of switch nodes (joined by switch-to-switch links)."""
    sets = DisjointSets(topology.switch_nodes())
    for u, v in caps:
        if u in sets and v in sets:
            sets.union(u, v)
    return sets.groups()


def _interleave(nodes: list[str], group_of: dict[str, str]) -> list[str]:
    """Nodes round-robin over their servers (groups), so that a ring unwinding of a
    switch shared by several servers crosses between servers at every hop it can."""
    by_group: dict[str, list[str]] = {}
    for c in nodes:
        by_group.setdefault(group_of[c], []).append(c)
    columns = list(by_group.values())
    longest = max(map(len, columns), default=0)     # a switch may reach no compute node
    return [col[i] for i in range(longest) for col in columns if i < len(col)]


def transpose(links: list[LogicalLink]) -> list[LogicalLink]:
    """The same links reversed (the transposed TEN of §IV-E)."""
    return [LogicalLink(x.dst, x.src, x.bandwidth, x.latency, tuple(reversed(x.path)))
            for x in links]


def _random_words(seed: int) -> Iterator[int]:
    """The 32-bit outputs of ``random.Random(seed)``'s Mersenne Twister, in order, drawn
    in bulk: ``getrandbits(32·B)`` holds B successive outputs, the first the least
    significant (CPython's ``getrandbits``)."""
    rng = random.Random(seed)
    while True:
        block = rng.getrandbits(32 * _WORDS).to_bytes(4 * _WORDS, "little")
        yield from np.frombuffer(block, dtype="<u4").tolist()


def _below(word: Callable[[], int], n: int) -> int:
    """``randrange(n)`` as CPython draws it from the output stream ``word``: the top
    n.bit_length() bits of an output, again until they are below n."""
    shift = 32 - n.bit_length()
    pick = word() >> shift
    while pick >= n:
        pick = word() >> shift
    return pick


def synthesize(links: list[LogicalLink], nodes: list[str], chunks_per_node: int,
               chunk_size: Fraction, seed: int, compiled_from: int = COMPILE_FROM
               ) -> Timetable:
    """One run of TACOS's allgather synthesis (Alg. 2 around Alg. 1) with ``seed``.

    From ``compiled_from`` deliveries (N·(N-1)·chunks per node) the matching runs
    compiled where numba is installed (:mod:`canopy.engine.baselines.tacos_kernel`, the
    same matches); below, without numba, or where the times would overflow 64 bits, as
    written here.

    The random draws are those of ``random.Random(seed)``'s ``randrange`` (the shuffle)
    and ``choice`` (ties), computed as CPython does from its output stream, read in bulk
    (:func:`_random_words`): ``randrange(n)`` takes an output's top n.bit_length() bits,
    again until they are below n. At each
    time only the nodes whose matching can have changed are visited (see below), so the
    matches are those of the plain loop over every node
    (tests/engine/baselines/test_tacos_synthesis.py keeps
    that loop as the reference).
    """
    costs, kind_of = _link_kinds(links, chunk_size)
    unit = math.lcm(*(c.denominator for c in costs))
    kind_ticks = [int(c * unit) for c in costs]
    ticks = [kind_ticks[k] for k in kind_of]
    index = {n: i for i, n in enumerate(nodes)}
    into: list[list[int]] = [[] for _ in nodes]
    out: list[list[tuple[int, int]]] = [[] for _ in nodes]   # (link, node it enters)
    for li, x in enumerate(links):
        into[index[x.dst]].append(li)
        out[index[x.src]].append((li, index[x.dst]))
    src_of = [index[x.src] for x in links]
    deliveries = len(nodes) * (len(nodes) - 1) * chunks_per_node
    kernel = compiled_kernel() if deliveries >= compiled_from and \
        max(ticks, default=0) * deliveries < 1 << 62 else None
    found = None if kernel is None else \
        _compiled(kernel, len(nodes), chunks_per_node, src_of, ticks, into, out, seed)
    if found is not None:        # else (no numba, or a node no route reaches) as below
        return Timetable(tuple(links), tuple(nodes), chunks_per_node, chunk_size,
                         *found, unit, seed)
    word = _random_words(seed).__next__
    chunks = [(o, q) for o in nodes for q in range(chunks_per_node)]
    held = [{ci for ci, (o, _) in enumerate(chunks) if o == node} for node in nodes]
    missing = [set(range(len(chunks))) - held[d] for d in range(len(nodes))]
    free_at = [0] * len(links)
    arrivals: list[tuple[int, int, int]] = []
    sent: list[int] = []          # the matches' columns: chunk, link, start, end
    over: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    now = 0
    left = sum(len(m) for m in missing)
    in_flight = 0
    touched = set(range(len(nodes)))
    while left or in_flight:
        while arrivals and arrivals[0][0] <= now:
            _, d, c = heapq.heappop(arrivals)
            held[d].add(c)
            in_flight -= 1
            touched.add(d)
            for li, e in out[d]:
                if free_at[li] <= now and c in missing[e]:
                    touched.add(e)
        # Alg. 1 shuffles all unsatisfied (d, c) and matches each in turn. Pairs of
        # different d compete for different links, and a chunk no free link into d can
        # supply is skipped, so shuffling each d's suppliable chunks alone (lazily,
        # stopping once d's free links are used up) draws the same matchings. A node
        # left with free links has nothing more to take over them until a chunk arrives
        # at it (freeing the link it came by) or a chunk it misses arrives at the source
        # of a free one, so only such nodes are visited (the others would draw nothing).
        for d in sorted(touched):
            free = [li for li in into[d] if free_at[li] <= now]
            if not free or not missing[d]:
                continue
            if len(free) == 1:
                pool = sorted(held[src_of[free[0]]] & missing[d])
            else:
                pool = sorted(set().union(*(held[src_of[li]] & missing[d] for li in free)))
            size = len(pool)
            drawn = 0
            while drawn < size:
                pick = drawn + _below(word, size - drawn)     # randrange(drawn, size)
                c = pool[pick]
                pool[pick] = pool[drawn]   # the shuffle's swap (pool[drawn] is not read again)
                drawn += 1
                if len(free) == 1:
                    li = free[0]
                    if c not in held[src_of[li]]:
                        continue
                    _below(word, 1)       # choice of one still draws
                else:
                    candidates = [li for li in free if c in held[src_of[li]]]
                    if not candidates:
                        continue
                    cheapest = min(ticks[li] for li in candidates)
                    tied = [li for li in candidates if ticks[li] == cheapest]
                    li = tied[_below(word, len(tied))]
                free.remove(li)
                free_at[li] = now + ticks[li]
                missing[d].discard(c)
                left -= 1
                in_flight += 1
                heapq.heappush(arrivals, (free_at[li], d, c))
                sent.append(c)
                over.append(li)
                starts.append(now)
                ends.append(free_at[li])
                if not free:
                    break
        touched = set()
        if not arrivals:
            if left:
                d = next(i for i, m in enumerate(missing) if m)
                raise ScheduleError(f"TACOS cannot deliver every chunk to '{nodes[d]}': no "
                                    "route reaches it.")
            break
        now = arrivals[0][0]
    return Timetable(tuple(links), tuple(nodes), chunks_per_node, chunk_size,
                     tuple(sent), tuple(over), tuple(starts), tuple(ends), unit, seed)


def _compiled(kernel: Callable[..., int], nodes: int, per_node: int, src_of: list[int],
              ticks: list[int], into: list[list[int]], out: list[list[tuple[int, int]]],
              seed: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                  tuple[int, ...]] | None:
    """The matches the compiled kernel draws (chunks, links, starts, ends), with more
    random outputs drawn in advance until they suffice; None when some node cannot be
    reached."""
    deliveries = nodes * (nodes - 1) * per_node
    i64 = np.int64
    arrays = (np.array(src_of, i64), np.array(ticks, i64),
              np.array([0, *itertools.accumulate(map(len, into))], i64),
              np.array([li for links in into for li in links], i64),
              np.array([0, *itertools.accumulate(map(len, out))], i64),
              np.array([li for pairs in out for li, _ in pairs], i64),
              np.array([e for pairs in out for _, e in pairs], i64))
    chunk, link, start, end = (np.empty(deliveries, i64) for _ in range(4))
    words = DRAWS_PER_DELIVERY * deliveries + _WORDS
    while True:
        count = kernel(nodes, per_node, *arrays, random_outputs(seed, words),
                       chunk, link, start, end)
        if count != SHORT:
            break
        words *= 2
    if count == STUCK:
        return None
    return (tuple(chunk.tolist()), tuple(link.tolist()), tuple(start.tolist()),
            tuple(end.tolist()))


def best_of(links: list[LogicalLink], nodes: list[str], chunks_per_node: int,
            chunk_size: Fraction, seeds: int) -> Timetable:
    """The fastest of ``seeds`` runs (TACOS is randomized; its tests keep the best)."""
    runs = [synthesize(links, nodes, chunks_per_node, chunk_size, s) for s in range(seeds)]
    return min(runs, key=lambda t: (t.time, t.seed))


def _link_kinds(links: list[LogicalLink], chunk_size: Fraction
                ) -> tuple[list[Fraction], list[int]]:
    """The distinct :func:`link_time` of a chunk over ``links`` and, per link, its index
    among them: the links a switch unwinds into share their bandwidth and latency (8 x DGX
    A100: 128 links, 2 kinds)."""
    # keyed by the integers of the reduced fractions (equal fractions, equal keys): hashing
    # a Fraction takes a modular inverse, and a synthesis asks for the kinds of every link
    kinds: dict[tuple[int, int, int, int], tuple[Fraction, Fraction]] = {}
    index: dict[tuple[int, int, int, int], int] = {}
    kind_of = []
    for x in links:
        b, a = x.bandwidth, x.latency
        key = (b.numerator, b.denominator, a.numerator, a.denominator)
        k = index.get(key)
        if k is None:
            k = index[key] = len(kinds)
            kinds[key] = (b, a)
        kind_of.append(k)
    return [link_time(chunk_size, b, a) for b, a in kinds.values()], kind_of


def receive_bound(links: list[LogicalLink], nodes: list[str], chunks_per_node: int,
                  chunk_size: Fraction) -> Fraction:
    """A lower bound on the time (µs) of any allgather timetable on ``links``: node d
    receives (N-1)·chunks_per_node chunks, and a link into d taking t per chunk carries
    one at a time, so at most T/t of them by time T; hence T >= (N-1)·chunks_per_node /
    Σ 1/t, for every d. 0 when a node has no link in (synthesis fails there anyway)."""
    costs, kind_of = _link_kinds(links, chunk_size)
    into = {d: [0] * len(costs) for d in nodes}      # per node its links in, by kind
    for x, k in zip(links, kind_of, strict=True):
        into[x.dst][k] += 1
    # nodes with the same links in by kind have the same rate (switch unwinding makes
    # most nodes alike), so each distinct count vector is summed once
    rates = [sum((n / t for n, t in zip(counts, costs, strict=True) if n), Fraction(0))
             for counts in set(map(tuple, into.values()))]
    slowest = min(rates)
    if not slowest:
        return Fraction(0)
    return (len(nodes) - 1) * chunks_per_node / slowest


def check_timetable(table: Timetable) -> None:
    """Raise ScheduleError unless the timetable is a valid allgather (postcondition).

    Every node ends with every chunk, receives each chunk once, sends only chunks it
    holds by then, and each logical link carries one chunk at a time.
    """
    nodes = table.nodes
    arrival: dict[tuple[str, tuple[str, int]], int] = {}
    for o in nodes:
        for q in range(table.chunks_per_node):
            arrival[(o, (o, q))] = 0
    for m in sorted(table.matches, key=lambda m: m.start):
        link = table.links[m.link]
        have = arrival.get((link.src, m.chunk))
        if have is None or have > m.start:
            raise ScheduleError(f"'{link.src}' sends chunk {m.chunk} at "
                                f"{float(Fraction(m.start, table.unit)):g} µs before holding it.")
        if (link.dst, m.chunk) in arrival:
            raise ScheduleError(f"'{link.dst}' receives chunk {m.chunk} twice.")
        arrival[(link.dst, m.chunk)] = m.end
    for o in nodes:
        for d in nodes:
            for q in range(table.chunks_per_node):
                if (d, (o, q)) not in arrival:
                    raise ScheduleError(f"'{d}' never receives chunk {(o, q)}.")
    busy: dict[int, list[Match]] = {}
    for m in table.matches:
        busy.setdefault(m.link, []).append(m)
    for li, ms in busy.items():
        ms.sort(key=lambda m: m.start)
        for a, b in zip(ms, ms[1:], strict=False):
            if b.start < a.end:
                x = table.links[li]
                raise ScheduleError(f"link {x.src} -> {x.dst} carries two chunks at once.")


def timetable_loads(tables: list[tuple[Timetable | None, bool]]) -> dict[Edge, Fraction]:
    """:func:`canopy.engine.model.plan.link_loads` of the plan of :func:`timetable_trees` of
    each (table, reduce) (None: no phase), without building the trees: every match is a
    tree edge over its link's route carrying 1/(N·chunks per node) of the message."""
    counts: dict[tuple[Path, Fraction], int] = {}
    for table, reduce in tables:
        if table is None:
            continue
        share = Fraction(1, len(table.nodes) * table.chunks_per_node)
        for li, count in collections.Counter(table.link).items():
            path = table.links[li].path
            key = (tuple(reversed(path)) if reduce else path, share)
            counts[key] = counts.get(key, 0) + count
    return path_loads((path, share * count) for (path, share), count in counts.items())


def timetable_trees(table: Timetable, reduce: bool = False) -> list[FlowTree]:
    """Each chunk's matches as a tree rooted at its origin.

    For ``reduce`` the timetable is an allgather on the transposed links: it is run
    backwards (data child -> parent along the original link, latest first).
    """
    per = table.chunks_per_node
    share = Fraction(1, len(table.nodes) * per)
    if not table.chunk:
        return []
    chunk, link, start, end = (np.array(column, np.int64) for column in
                               (table.chunk, table.link, table.start, table.end))
    order = np.lexsort((link, start, chunk))        # each chunk's by start, then link
    ticks = (end.max() - end if reduce else start)[order]
    distinct, which = np.unique(ticks, return_inverse=True)
    times = [Fraction(t, table.unit) for t in distinct.tolist()]   # one per distinct tick
    hops = [(x.src, x.dst, tuple(reversed(x.path)) if reduce else x.path)
            for x in table.links]
    edges = [FlowEdge(src, dst, path, times[k])
             for (src, dst, path), k in zip(map(hops.__getitem__, link[order].tolist()),
                                            which.tolist(), strict=True)]
    counts = np.bincount(chunk, minlength=len(table.nodes) * per).tolist()
    firsts = [0, *itertools.accumulate(counts)]
    keys = sorted(((table.nodes[c // per], c % per), c) for c, n in enumerate(counts) if n)
    return [FlowTree(("tacos",) + key, key[0], tuple(edges[firsts[c]:firsts[c + 1]]), share,
                     reduce)
            for key, c in keys]


class _Tacos:
    """TACOS for one topology and collective, synthesizing per chunk size (cached).

    With several chunk counts per node, each message size uses the count whose
    synthesized collective time is shortest (TACOS's own cost model decides, as a user
    sweeping the parameter would). A count whose :func:`receive_bound` already exceeds
    the best synthesized time cannot be chosen and is not synthesized.
    """

    def __init__(self, topology: Topology, collective: str, chunk_options: tuple[int, ...],
                 seeds: int, unwinding: str, default_latency: Fraction) -> None:
        self.collective = collective
        self.nodes = topology.compute_nodes()
        self.options = chunk_options
        self.seeds = seeds
        self.links = unwind(topology, unwinding, default_latency)
        self.capacities = topology.capacities()
        self.bare = [LogicalLink(x.src, x.dst, x.bandwidth, Fraction(0), x.path)
                     for x in self.links]
        self.transposed = {True: transpose(self.links), False: transpose(self.bare)}
        self.cache: dict[tuple[Fraction, int, bool], tuple[Timetable | None,
                                                           Timetable | None]] = {}
        self.chosen: dict[Fraction, int] = {}
        self.timed: dict[int, Fraction] = {}   # per size: the chosen timetable's algbw
        # per size (allreduce): each phase's link-load bound and busiest link
        self.phases: dict[int, tuple[tuple[Fraction, Edge], tuple[Fraction, Edge]]] = {}

    def tables(self, size: Fraction, chunks: int, latency: bool = True
               ) -> tuple[Timetable | None, Timetable | None]:
        """(reduce-scatter timetable on the transposed links, allgather timetable)."""
        key = (size, chunks, latency)
        if key not in self.cache:
            links = self.links if latency else self.bare
            chunk = Fraction(size) / (len(self.nodes) * chunks)
            rs = ag = None
            if self.collective in ("reduce-scatter", "allreduce"):
                rs = best_of(self.transposed[latency], self.nodes, chunks, chunk,
                             self.seeds)
            if self.collective in ("allgather", "allreduce"):
                ag = best_of(links, self.nodes, chunks, chunk, self.seeds)
            self.cache[key] = (rs, ag)
        return self.cache[key]

    def total(self, size: Fraction, chunks: int, latency: bool = True) -> Fraction:
        return sum((t.time for t in self.tables(size, chunks, latency) if t), Fraction(0))

    def bound(self, size: Fraction, chunks: int, latency: bool) -> Fraction:
        """A lower bound on :meth:`total` (:func:`receive_bound` of each phase)."""
        links = self.links if latency else self.bare
        chunk = Fraction(size) / (len(self.nodes) * chunks)
        phases = ([self.transposed[latency]] if self.collective != "allgather" else []) + \
            ([links] if self.collective != "reduce-scatter" else [])
        return sum((receive_bound(x, self.nodes, chunks, chunk) for x in phases), Fraction(0))

    def best_chunks(self, size: Fraction, latency: bool = True) -> int:
        """The count c minimizing (total, c), synthesizing counts in order of their bound
        and stopping once (bound, c) exceeds the best (total, c) found."""
        bounds = {c: self.bound(size, c, latency) for c in self.options}
        best: tuple[Fraction, int] | None = None
        for c in sorted(self.options, key=lambda c: (bounds[c], c)):
            if best is not None and (bounds[c], c) > best:
                break
            key = (self.total(size, c, latency), c)
            best = key if best is None else min(best, key)
        assert best is not None
        return best[1]

    def plan(self, size: Fraction) -> CollectivePlan:
        chunks = self.best_chunks(size)
        self.chosen[size] = chunks
        self.timed[int(size)] = algbw_gbps(size, self.total(size, chunks))
        rs, ag = self.tables(size, chunks)
        if rs is not None and ag is not None:
            caps = self.capacities
            self.phases[int(size)] = (loads_bound(timetable_loads([(rs, True)]), caps),
                                      loads_bound(timetable_loads([(ag, False)]), caps))
        reduce_trees = timetable_trees(rs, reduce=True) if rs else []
        broadcast_trees = timetable_trees(ag) if ag else []
        return CollectivePlan(self.collective, tuple(self.nodes), tuple(reduce_trees),
                              tuple(broadcast_trees), ordered_links=True)

    def bandwidth_only(self) -> tuple[Fraction, int]:
        """Best algbw with α = 0 over the chunk counts (size-independent), and the count."""
        size = Fraction(1)
        chunks = self.best_chunks(size, latency=False)
        return algbw_gbps(size, self.total(size, chunks, False)), chunks


def tacos_baseline(topology: Topology, collective: str = "allgather",
                   chunks_per_node: tuple[int, ...] = DEFAULT_CHUNKS,
                   seeds: int | None = None, unwinding: str = "ring",
                   default_latency: Fraction = DEFAULT_LATENCY_US) -> BaselineResult:
    """TACOS's schedule for ``collective`` and its bound: the algbw its trees' link loads
    allow (the synthesized timetable's own algbw, α = 0, is ``timetable_algbw``).

    ``chunks_per_node`` lists the chunk counts to try; each run keeps the best of
    ``seeds`` random seeds (by default :func:`auto_seeds`).
    """
    if seeds is None:
        seeds = auto_seeds(len(topology.compute_nodes()), tuple(chunks_per_node))
    try:
        tacos = _Tacos(topology, collective, tuple(chunks_per_node), seeds, unwinding,
                       default_latency)
        algbw, chunks = tacos.bandwidth_only()
    except ScheduleError as exc:
        return BaselineResult.not_applicable("tacos", collective, str(exc))
    rs, ag = tacos.tables(Fraction(1), chunks, latency=False)
    # The row's bound, like every other row's, is the link congestion of its schedule; the
    # synthesized timetable's own time (steps of whole chunks, idle links between them)
    # is longer, and the pipelined execution may beat it.
    bound, _ = loads_bound(timetable_loads([(rs, True), (ag, False)]), topology.capacities())
    return BaselineResult(
        "tacos", collective, bound, schedule={"reduce-scatter": rs, "allgather": ag},
        details={"timetable_algbw": algbw, "latency_free_bound": bound,
                 "chunks_per_node": chunks,
                 "chunk_options": list(chunks_per_node),
                 "chunks_by_size": tacos.chosen, "timetable_algbw_at": tacos.timed,
                 "phase_bounds_at": tacos.phases,
                 "seeds": seeds, "unwinding": unwinding,
                 "logical_links": len(tacos.links)},
        plan_at=tacos.plan)
