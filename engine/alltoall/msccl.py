"""Lowering an all-to-all schedule to MSCCL XML (``coll="alltoall"``, out of place).

Basu et al. (arXiv:2309.13541) lower their link- and route-based schedules to the MSCCL
runtime (Fig. 3-4). Here each ordered pair (s, t) sends ``c`` chunks: block t of rank s's
input goes to block s of rank t's output. The pair's routes share the c chunks in proportion
to their rates (exactly when c makes every share whole, else the closest split with c ≤
:data:`MAX_CHUNKS`, reported as ``share_error``). Where shares are not whole, each route gets
its share's floor or ceiling of chunks, the ceilings chosen so that the busiest link carries
as little as it can (:func:`_balanced`): rounding each pair on its own, many pairs' extra
chunks can land on one link, which then bounds the whole program.

Switches are transparent to MSCCL: a route's compute nodes are its hops, and a compute
node in the middle of a route relays: it receives into its scratch buffer and a
dependent step sends the chunks on. Every GPU has one sending thread block per peer and
hop number it sends at, and one receiving thread block per peer and hop number it hears
at (each pair its own channel): a thread block runs its steps in order, so a relay's
send, which waits for its chunks to arrive, would hold back the sends queued behind it
(the GPU's own blocks of the next loop iteration) on a thread block shared by all hops,
where the execution model gives every route a connection of its own
(:mod:`canopy.engine.alltoall.compare`). Where those thread blocks exceed the GPU's
(:data:`MscclLimits.max_tbs_per_gpu`) or the channels, every hop to a peer shares one
thread block. A thread block's messages are ordered by hop number then pair on both
ends, so receivers always drain and the program cannot deadlock. Connections are spread
over channels so that no GPU has more than the runtime's thread blocks per channel. The
program is run through Canopy's MSCCL simulator before it is returned.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from lxml import etree

from canopy.engine.alltoall.schedule import AllToAllSchedule
from canopy.engine.model.errors import ScheduleError
from canopy.engine.msccl.executor import MscclXmlError, SimulationReport, simulate_bytes
from canopy.engine.msccl.threadblocks import MscclLimitError, MscclLimits

MAX_CHUNKS = 8


@dataclass(frozen=True)
class _Message:
    hop: int
    pair: int
    sender: int
    receiver: int
    src: tuple[str, int]
    dst: tuple[str, int]
    cnt: int
    after: tuple[int, int] | None      # (rank, message id) received before sending


@dataclass(frozen=True)
class AllToAllXml:
    data: bytes
    chunks_per_pair: int
    share_error: float
    report: SimulationReport


def _apportion(shares: list[Fraction], c: int) -> list[int]:
    """Largest-remainder split of ``c`` chunks by ``shares`` (which sum to 1)."""
    raw = [s * c for s in shares]
    counts = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - counts[i], reverse=True)
    for i in order[: c - sum(counts)]:
        counts[i] += 1
    return counts


def _routes_by_pair(schedule: AllToAllSchedule) -> dict[tuple[int, int], list]:
    """Per pair of ranks its routes: (rate, rank hops, arcs crossed)."""
    problem = schedule.problem
    rank = {c: r for r, c in enumerate(problem.compute)}
    is_compute = set(problem.compute)
    arc = problem.arc_index()
    pairs: dict[tuple[int, int], list] = defaultdict(list)
    for s, t, path, rate in schedule.paths():
        hops = [rank[v] for v in path if v in is_compute]
        arcs = [arc[(u, v)] for u, v in zip(path, path[1:], strict=False)]
        pairs[(rank[s], rank[t])].append((rate, hops, arcs))
    return pairs


def chunking(schedule: AllToAllSchedule, max_chunks: int = MAX_CHUNKS
             ) -> tuple[int, dict[tuple[int, int], list[tuple[int, list[int]]]], float]:
    """(c, per pair the (chunks, rank hops) of each route, largest share error): c is the
    fewest chunks per pair with the smallest error of a largest-remainder split; the split
    itself is :func:`_balanced`'s."""
    pairs = _routes_by_pair(schedule)
    best = None
    for c in range(1, max_chunks + 1):
        error = 0.0
        for routes in pairs.values():
            total = sum(rate for rate, _, _ in routes)
            shares = [rate / total for rate, _, _ in routes]
            nearest = _apportion(shares, c)
            error = max(error, max(abs(float(Fraction(k, c) - s))
                                   for k, s in zip(nearest, shares, strict=True)))
        if best is None or error < best[1] - 1e-12:
            best = (c, error)
        if error == 0:
            break
    assert best is not None
    c = best[0]
    counts = _balanced(pairs, c, schedule.problem.capacity)
    split = {}
    error = 0.0
    for pair, routes in pairs.items():
        total = sum(rate for rate, _, _ in routes)
        error = max(error, max(abs(float(Fraction(k, c) - rate / total))
                               for k, (rate, _, _) in zip(counts[pair], routes, strict=True)))
        split[pair] = [(k, hops) for k, (_, hops, _) in zip(counts[pair], routes, strict=True)
                       if k]
    return c, split, error


def _balanced(pairs: dict[tuple[int, int], list], c: int, capacity: tuple[Fraction, ...]
              ) -> dict[tuple[int, int], list[int]]:
    """Per pair the chunks of each route: the floor of its share of ``c``, plus one on as
    many routes as the floors leave chunks, chosen greedily pair by pair where the busiest
    arc the extra chunk crosses (chunks over capacity) stays least loaded, then moved
    between routes of one pair while a move lowers the busiest arc of the two routes (each
    move lowers the arcs' loads in descending order, so the moves end)."""
    inverse = [1 / float(cap) for cap in capacity]
    load = [0.0] * len(capacity)
    counts: dict[tuple[int, int], list[int]] = {}
    extra: dict[tuple[int, int], list[bool]] = {}
    for pair, routes in pairs.items():
        total = sum(rate for rate, _, _ in routes)
        raw = [rate * c / total for rate, _, _ in routes]
        counts[pair] = [int(x) for x in raw]
        extra[pair] = [False] * len(routes)
        for k, (_, _, arcs) in zip(counts[pair], routes, strict=True):
            for a in arcs:
                load[a] += k * inverse[a]

    def peak(arcs: list[int], more: int) -> float:
        return max(load[a] + more * inverse[a] for a in arcs)

    def add(arcs: list[int], more: int) -> None:
        for a in arcs:
            load[a] += more * inverse[a]

    for pair, routes in sorted(pairs.items()):
        total = sum(rate for rate, _, _ in routes)
        fractional = [i for i, (rate, _, _) in enumerate(routes)
                      if rate * c / total != counts[pair][i]]
        for _ in range(c - sum(counts[pair])):
            i = min((i for i in fractional if not extra[pair][i]),
                    key=lambda i: (peak(routes[i][2], 1), i))
            extra[pair][i] = True
            counts[pair][i] += 1
            add(routes[i][2], 1)
    through: dict[int, list[tuple[tuple[int, int], int]]] = defaultdict(list)
    for pair, routes in pairs.items():
        for i, (_, _, arcs) in enumerate(routes):
            for a in arcs:
                through[a].append((pair, i))
    while True:
        busiest = max(range(len(load)), key=lambda a: (load[a], -a))
        move = None
        for pair, i in through[busiest]:
            if not extra[pair][i]:
                continue
            routes = pairs[pair]
            total = sum(rate for rate, _, _ in routes)
            for j, (rate, _, arcs) in enumerate(routes):
                if extra[pair][j] or rate * c / total == counts[pair][j]:
                    continue
                before = max(peak(routes[i][2], 0), peak(arcs, 0))
                add(routes[i][2], -1)
                after = max(peak(routes[i][2], 0), peak(arcs, 1))
                add(routes[i][2], 1)
                if after < before * (1 - 1e-12):
                    move = (pair, i, j)
                    break
            if move is not None:
                break
        if move is None:
            return counts
        pair, i, j = move
        routes = pairs[pair]
        extra[pair][i], extra[pair][j] = False, True
        counts[pair][i] -= 1
        counts[pair][j] += 1
        add(routes[i][2], -1)
        add(routes[j][2], 1)


def _messages(ngpus: int, c: int, split: dict, limits: MscclLimits
              ) -> tuple[list[_Message], list[int]]:
    messages: list[_Message] = []
    scratch = [0] * ngpus
    for index, ((s, t), routes) in enumerate(sorted(split.items())):
        offset = 0
        for count, hops in routes:
            for start in range(0, count, limits.max_count):
                cnt = min(limits.max_count, count - start)
                q = offset + start
                src: tuple[str, int] = ("i", t * c + q)
                after = None
                for j, (u, v) in enumerate(zip(hops, hops[1:], strict=False)):
                    if v == t:
                        dst: tuple[str, int] = ("o", s * c + q)
                    else:
                        dst = ("s", scratch[v])
                        scratch[v] += cnt
                    messages.append(_Message(j, index, u, v, src, dst, cnt, after))
                    after = (v, len(messages) - 1)
                    src = dst
            offset += count
    return messages, scratch


def _channels(messages: list[_Message], ngpus: int, limits: MscclLimits, by_hop: bool
              ) -> dict[tuple[int, int, int], int]:
    """A channel per connection (sender, receiver, hop number or 0) such that no GPU has
    more than the allowed thread blocks on one channel (one sending block per connection
    out, one receiving block per connection in) and the connections between two GPUs
    have channels of their own."""
    per: list[defaultdict[int, int]] = [defaultdict(int) for _ in range(ngpus)]
    channel: dict[tuple[int, int, int], int] = {}
    taken: set[tuple[int, int, int]] = set()
    for m in messages:
        key = (m.sender, m.receiver, m.hop if by_hop else 0)
        if key in channel:
            continue
        ch = 0
        while (m.sender, m.receiver, ch) in taken or \
                per[m.sender][ch] >= limits.max_tbs_per_channel or \
                per[m.receiver][ch] >= limits.max_tbs_per_channel:
            ch += 1
        if ch >= limits.max_channels:
            raise MscclLimitError(f"all-to-all needs more than {limits.max_channels} channels "
                                  f"of {limits.max_tbs_per_channel} thread blocks at rank "
                                  f"{m.sender}.")
        channel[key] = ch
        taken.add((m.sender, m.receiver, ch))
        per[m.sender][ch] += 1
        per[m.receiver][ch] += 1
    return channel


def alltoall_xml(schedule: AllToAllSchedule, name: str | None = None,
                 limits: MscclLimits | None = None, max_chunks: int = MAX_CHUNKS
                 ) -> AllToAllXml:
    """The MSCCL XML of ``schedule``, checked by Canopy's simulator: a thread block per
    peer and hop number, or where those do not fit, per peer. Raises
    :class:`MscclLimitError` when the runtime's limits cannot be met."""
    try:
        return _alltoall_xml(schedule, name, limits or MscclLimits(), max_chunks, True)
    except MscclLimitError:
        return _alltoall_xml(schedule, name, limits or MscclLimits(), max_chunks, False)


def _alltoall_xml(schedule: AllToAllSchedule, name: str | None, limits: MscclLimits,
                  max_chunks: int, by_hop: bool) -> AllToAllXml:
    ngpus = schedule.problem.num_compute
    c, split, error = chunking(schedule, max_chunks)
    messages, scratch = _messages(ngpus, c, split, limits)
    channel = _channels(messages, ngpus, limits, by_hop)
    order = sorted(range(len(messages)), key=lambda i: (messages[i].hop, messages[i].pair, i))
    # thread blocks: (rank, "send"/"recv", peer, hop number or 0) -> their message ids
    tbs: dict[tuple[int, str, int, int], list[int]] = defaultdict(list)
    for i in order:
        m = messages[i]
        hop = m.hop if by_hop else 0
        tbs[(m.sender, "send", m.receiver, hop)].append(i)
        tbs[(m.receiver, "recv", m.sender, hop)].append(i)
    ids: dict[tuple[int, str, int, int], int] = {}
    per_rank: list[list[tuple[int, str, int, int]]] = [[] for _ in range(ngpus)]
    for key in sorted(tbs):
        ids[key] = len(per_rank[key[0]])
        per_rank[key[0]].append(key)
    most = max((len(keys) for keys in per_rank), default=0)
    if most > limits.max_tbs_per_gpu:
        raise MscclLimitError(f"all-to-all needs {most} thread blocks on a GPU, more than "
                              f"the runtime's {limits.max_tbs_per_gpu}.")
    recv_pos = {}
    for key, items in tbs.items():
        if key[1] == "recv":
            first = 1 if ids[key] == 0 else 0        # tb 0 starts with the own-block copy
            for pos, i in enumerate(items):
                recv_pos[i] = (ids[key], first + pos)
    depended = {m.after[1] for m in messages if m.after is not None}

    algo = etree.Element("algo")
    for attr, value in [("name", name or f"canopy-alltoall-{ngpus}gpus-c{c}"),
                        ("proto", "Simple"),
                        ("nchannels", max(channel.values(), default=0) + 1),
                        ("nchunksperloop", ngpus * c), ("ngpus", ngpus), ("coll", "alltoall"),
                        ("inplace", 0), ("outofplace", 1), ("minBytes", 0),
                        ("maxBytes", 2**63 - 1)]:
        algo.set(attr, str(value))
    for rank in range(ngpus):
        gpu = etree.SubElement(algo, "gpu")
        for attr, value in [("id", rank), ("i_chunks", ngpus * c), ("o_chunks", ngpus * c),
                            ("s_chunks", scratch[rank])]:
            gpu.set(attr, str(value))
        keys = per_rank[rank] or [(rank, "copy", -1, 0)]
        for tb_id, key in enumerate(keys):
            _, kind, peer, hop = key
            tb = etree.SubElement(gpu, "tb")
            ch = channel.get((rank, peer, hop) if kind == "send" else (peer, rank, hop), 0)
            for attr, value in [("id", tb_id), ("send", peer if kind == "send" else -1),
                                ("recv", peer if kind == "recv" else -1), ("chan", ch)]:
                tb.set(attr, str(value))
            steps: list[tuple[str, tuple[str, int], tuple[str, int], int,
                              tuple[int, int] | None, bool]] = []
            if tb_id == 0:
                steps.append(("cpy", ("i", rank * c), ("o", rank * c), c, None, False))
            for i in tbs.get(key, []):
                m = messages[i]
                if kind == "send":
                    dep = recv_pos[m.after[1]] if m.after else None
                    steps.append(("s", m.src, m.dst, m.cnt, dep, False))
                else:
                    steps.append(("r", m.src, m.dst, m.cnt, None, i in depended))
            if len(steps) > limits.max_steps_per_tb:
                raise MscclLimitError(f"rank {rank}'s thread block to/from rank {peer} needs "
                                      f"{len(steps)} steps; MSCCL allows "
                                      f"{limits.max_steps_per_tb}.")
            for s, (kind_, src, dst, cnt, dep, hasdep) in enumerate(steps):
                step = etree.SubElement(tb, "step")
                for attr, value in [("s", s), ("type", kind_), ("srcbuf", src[0]),
                                    ("srcoff", src[1]), ("dstbuf", dst[0]), ("dstoff", dst[1]),
                                    ("cnt", cnt), ("depid", dep[0] if dep else -1),
                                    ("deps", dep[1] if dep else -1),
                                    ("hasdep", int(hasdep))]:
                    step.set(attr, str(value))
    data = etree.tostring(algo, pretty_print=True, encoding="utf-8")
    try:
        report = simulate_bytes(data, limits=limits, source="all-to-all MSCCL XML")
    except MscclXmlError as exc:
        raise ScheduleError(f"the all-to-all MSCCL XML failed Canopy's simulator, which is a "
                            f"bug in Canopy ({exc})") from None
    return AllToAllXml(data, c, error, report)
