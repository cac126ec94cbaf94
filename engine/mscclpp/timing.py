"""How long an MSCCL++ execution plan takes on a topology, in the execution model of
:mod:`canopy.engine.execution.simulate` (``canopy check-plan PLAN --topology TOPO --size S``).

The plan becomes a :class:`~canopy.engine.execution.simulate.Program` as the runtime runs it:

* **Sizes.** A chunk is the message over the chunks of the whole buffer (the output for
  allgather, the input otherwise: ``getSizeAndChunks``); an op moves its chunks, split
  among a thread-block group; a ``pipeline`` runs ``ceil(num_chunks · chunk / unit_size)``
  iterations, each op moving its next ``unit_size`` bytes (the last slice shorter).
* **Connections.** The puts of a thread block to one peer (memory channel) or on one port
  channel form one in-order connection of weight 1, routed over the thread block's
  ``canopy_route`` where Canopy wrote one (the plan's route, the one ``canopy compare``
  simulated), else over the topology's shortest paths, least congested given the
  connections routed before. A route relaying through another GPU is one connection per
  hop. Remote reads (``get``, ``rre``/``rres``) are connections from the peer.
* **Order.** A thread block runs its ops one after the other; a put hands its message to
  its connection (it does not wait for it), a ``signal`` carries the arrival of the puts
  before it on its channel (or, without puts, what its thread block has waited for), a
  ``wait`` waits for the arrival its signal carries; semaphores and barriers pass on what
  their releasing thread blocks waited for; local copies and reductions take no time, and
  switch-channel ops are not timed. This is the MSCCL XML model of
  :mod:`canopy.engine.msccl.timing` step for step, so a plan Canopy wrote from an XML gets
  that XML's time at the same loop count, which is compare's at its pipeline depth.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from canopy.engine.execution.extrapolation import MAX_MESSAGES, loop_time
from canopy.engine.execution.kernel import FlatProgram, run_flat
from canopy.engine.execution.program import DEFAULT_LATENCY_US, Program, algbw_gbps
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import add_path_load
from canopy.engine.model.topology import Topology
from canopy.engine.mscclpp.reach_kernel import compiled_reached
from canopy.engine.mscclpp.reader import Gpu, Op, PlanModel, Ref, ThreadBlock
from canopy.engine.network.routing import Router


@dataclass(frozen=True)
class PlanTiming:
    time_us: Fraction
    message_size: Fraction
    iterations: int
    connections: int
    messages: int

    @property
    def algbw(self) -> Fraction:
        return algbw_gbps(self.message_size, self.time_us)


def chunk_bytes(plan: PlanModel, size: Fraction) -> Fraction:
    gpu = plan.gpus[0]
    if plan.collective == "allgather" and gpu.output_chunks:
        return size / gpu.output_chunks
    return size / (gpu.input_chunks or gpu.output_chunks)


def iterations(plan: PlanModel, size: Fraction) -> int:
    """The most iterations any pipeline of the plan runs at ``size``."""
    chunk = chunk_bytes(plan, size)
    counts = [-(-(op.num_chunks * chunk) // op.unit_size) for g in plan.gpus for tb in g.tbs
              for op in tb.ops if op.name == "pipeline"]
    return int(max(counts, default=1))


def size_problem(plan: PlanModel, size: int) -> str | None:
    """Why the runtime would refuse ``size`` (``checkMessageSize``), or None."""
    gpu = plan.gpus[0]
    n = plan.ngpus
    whole = {"allgather": (size // n, size), "reducescatter": (size, size // n)}.get(
        plan.collective, (size, size))
    a = plan.alignment
    if any(b % a or (c and (b // a) % c) for b, c in zip(whole, (gpu.input_chunks,
                                                                gpu.output_chunks),
                                                         strict=True)):
        return (f"the runtime refuses {size} bytes: input and output must be multiples of "
                f"{a} bytes times their chunks ({gpu.input_chunks} and {gpu.output_chunks}).")
    if not plan.min_size <= size <= plan.max_size:
        return (f"the plan runs messages of {plan.min_size} to {plan.max_size} bytes, so the "
                f"runtime would not pick it at {size} bytes.")
    end = buffer_end(plan.gpus, size, n, plan.collective)
    if end >= OFFSET_LIMIT:
        return (f"at {size} bytes the plan's buffers reach byte {end}, but the runtime keeps "
                f"an op's byte offsets and sizes in 32 bits (they would wrap past 4 GiB).")
    return None


OFFSET_LIMIT = 1 << 32
"""The runtime stores every op's byte offsets and sizes in 32 bits (``Operation`` in
``execution_common.hpp``, ``getBufferSize`` and the kernels' offset arithmetic), without a
check: an offset of 4 GiB or more wraps."""


def buffer_end(gpus: list[Gpu], size: int, ngpus: int, collective: str) -> int:
    """The largest byte offset an op of the plan can name at ``size`` (a chunk is the
    rank's input over its input chunks, or its output over its output chunks without
    input chunks, as ``getSizeAndChunks``; every buffer's chunks are that size): the most
    chunks any GPU's input, output or scratch holds, times the chunk. Must stay below
    OFFSET_LIMIT (the buffers' offsets within the registered memory come on top)."""
    ins, outs = {"allgather": (size // ngpus, size),
                 "reducescatter": (size, size // ngpus)}.get(collective, (size, size))
    gpu = gpus[0]
    chunk = ins // gpu.input_chunks if gpu.input_chunks else outs // gpu.output_chunks
    return chunk * max(max(g.input_chunks, g.output_chunks, g.scratch_chunks) for g in gpus)


PUTS = ("put", "pws", "pwsf", "res", "rres", "ppkt", "rppkt", "respkt", "recspkt")
READS = ("get", "rre", "rres")
# the ops the walk times or waits on; the others (local data ops, switch ops, nop, flush)
# take no time and wait on nothing, so the walk leaves them out
TIMED = frozenset((*PUTS, *READS, "signal", "rlxsignal", "wait", "rlxwait", "sem_acquire",
                   "sem_release", "barrier"))


class _Builder:
    def __init__(self, plan: PlanModel, topology: Topology, size: Fraction, count: int) -> None:
        self.plan, self.topology, self.count = plan, topology, count
        self.nodes = list(topology.compute_nodes())
        if len(self.nodes) != plan.ngpus:
            raise ScheduleError(f"the plan has {plan.ngpus} GPUs but the topology has "
                                f"{len(self.nodes)} compute nodes.")
        self.chunk = chunk_bytes(plan, size)
        self.switches = frozenset(topology.switch_nodes())
        self.router = Router(topology)
        self.program = Program()
        self.hops: dict[tuple, list[int]] = {}
        self.loads: dict = {}
        # per send: its connection, its size (an index into ``amounts``), the sends it waits
        # for (``after``, CSR with ``after_ptr``), the longest chain of waits up to it and
        # the latest loop iteration in that chain (``late``: see :meth:`reaches`);
        # ``waits`` holds the same lists less what its connection's previous send waited
        # for (CSR, ``wait_ptr``)
        # (every index here fits in 32 bits: 2**31 sends, or list entries, are far past the
        # memory budget, and an array refuses a value past its type rather than wrap it)
        self.conn = array("i")
        self.amount_of = array("i")
        self.amounts: dict[Fraction, int] = {}
        self.after, self.after_ptr = array("i"), array("i", [0])
        self.depth, self.late = array("i"), array("i")
        # the same lists read the other way: per send the last entry of ``after`` naming it
        # (``named``, -1 if none), per entry the entry before it naming the same send
        # (``next_named``), so the sends waiting for a send directly are found from it
        self.named, self.next_named = array("i"), array("i")
        self.waits, self.wait_ptr = array("i"), array("i", [0])
        self.last_on: dict[int, tuple[int, ...]] = {}   # per connection: its last send's after
        self.sized: dict[tuple, Fraction] = {}      # bytes_of's answers
        self.need: list[tuple] = []                 # what the last blocked step waits on
        self.woken: set[tuple[int, int]] = set()    # thread blocks whose wait may pass now
        self.waiters: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
        self.takers: dict[tuple[int, int], int] = {}    # per GPU and barrier: its blocks
        self.ends: dict[tuple, tuple[int, tuple]] = {}  # endpoint's answers
        self.wait_ends: dict[tuple, list[tuple]] = {}   # per wait: the endpoints it waits on
        self.put_targets: dict[tuple, tuple[list, int]] = {}   # per put: its targets
        self.put_messages: dict[tuple, list] = {}       # per put and iteration: puts()
        self.through: dict[tuple, int] = defaultdict(int)   # per barrier round: passed
        # the compiled search (:meth:`reached`) and its marks and stack, one entry per send
        self.kernel = compiled_reached()
        self.mark = self.stack = np.zeros(0, dtype=np.int32)
        self.stamp = 1

    def wake(self, resource: tuple) -> None:
        """A queue, semaphore or barrier ``resource`` changed: the thread blocks blocked on
        it may pass now."""
        found = self.waiters.pop(resource, None)
        if found:
            self.woken.update(found)

    # -- connections and messages ---------------------------------------------------
    def connection(self, key: tuple, u: int, v: int, tb: ThreadBlock | None) -> list[int]:
        if key in self.hops:
            return self.hops[key]
        route: tuple[str, ...] | None = None
        caps = self.router.capacity
        if tb is not None and tb.route:
            route = (self.nodes[u], *tb.route, self.nodes[v])
            if any(e not in caps for e in zip(route, route[1:], strict=False)):
                route = None
        if route is None:
            route = self.router.route(self.nodes[u], self.nodes[v], self.loads, Fraction(1))
            if route is None:
                raise ScheduleError(f"GPU {u} ({self.nodes[u]}) cannot reach GPU {v} "
                                    f"({self.nodes[v]}) in the topology.")
        add_path_load(self.loads, route, Fraction(1))
        cut = [i for i in range(1, len(route) - 1) if route[i] not in self.switches]
        bounds = [0, *cut, len(route) - 1]
        self.hops[key] = [self.program.connect(route[a:b + 1])
                          for a, b in zip(bounds, bounds[1:], strict=False)]
        return self.hops[key]

    def amount(self, size: Fraction) -> int:
        """``size`` as an index into ``amounts``."""
        return self.amounts.setdefault(size, len(self.amounts))

    def message(self, hops: list[int], amount: int, after: list[int], it: int) -> int:
        """A message of ``amounts``' ``amount`` bytes over ``hops`` once ``after`` arrived,
        sent in loop iteration ``it``; its last hop's send. A connection starts a send only
        once the one before it has started, so what that one waited for has arrived by
        then: the run gets only the rest (``waits``), which changes no event of it."""
        prev, sid = tuple(after), -1
        depth, lates = self.depth, self.late
        level = max([depth[a] for a in prev], default=0)
        late = max([it, *[lates[a] for a in prev]])
        named, next_named = self.named, self.next_named
        for hop in hops:
            sid = len(self.conn)
            level += 1
            self.conn.append(hop)
            self.amount_of.append(amount)
            entry = len(self.after)
            for a in prev:
                next_named.append(named[a])
                named[a] = entry
                entry += 1
            named.append(-1)
            self.after.extend(prev)
            self.after_ptr.append(len(self.after))
            depth.append(level)
            lates.append(late)
            before = self.last_on.get(hop, ())
            self.waits.extend([a for a in prev if a not in before] if before else prev)
            self.wait_ptr.append(len(self.waits))
            self.last_on[hop] = prev
            prev = (sid,)
        return sid

    def latest(self, sends: list[int]) -> list[int]:
        """The sends that waiting for all of ``sends`` comes down to: a send is left out
        where another of them arrives no earlier in every run, being later on the same
        in-order connection or waiting for it (through the sends it waits for, each
        starting only once those arrive). What is left is an antichain of that order, so a
        thread block's list holds the connections its waits still race on rather than every
        connection it has heard from through signals, and no message's longest chain of
        waits (:func:`canopy.engine.msccl.timing._stages`) changes."""
        if len(sends) < 2:
            return list(sends)
        conn, depth = self.conn, self.depth
        keep = sorted(set(sends))
        conns = [conn[sid] for sid in keep]
        if len(set(conns)) < len(keep):     # the latest send of each connection
            keep = sorted(dict(zip(conns, keep, strict=True)).values())
            if len(keep) < 2:
                return keep
        # a send waits only for earlier ones with shorter chains, so only a send that is
        # earlier than another of the list and shorter can be left out (``open_``)
        open_: list[int] = []
        longest = 0
        for t in reversed(keep):
            d = depth[t]
            if d < longest:
                open_.append(t)
            elif d > longest:
                longest = d
        if not open_:
            return keep
        # first the sends the list's own sends wait for directly, latest first (most lists
        # are settled there), then a search back for each send still open
        after, ptr = self.after, self.after_ptr
        lo, left = open_[-1], set(open_)
        for b in reversed(keep):
            if b <= lo:
                break
            left.difference_update(after[ptr[b]:ptr[b + 1]])
            if not left:
                break
        reached = set(open_) - left
        if left:
            reached.update(self.reached(keep, sorted(left)))
        return [t for t in keep if t not in reached]

    def reached(self, sends: list[int], ts: list[int]) -> list[int]:
        """The sends of ``ts`` one of ``sends`` waits for (:meth:`reaches`), asked of the
        compiled search where numba is installed (:mod:`canopy.engine.mscclpp.reach_kernel`,
        the same answers)."""
        kernel = self.kernel
        if kernel is None:
            return [t for t in ts if self.reaches(sends, t)]
        n = len(self.depth)
        if len(self.mark) < n:
            grown = n + n // 4 + 1024
            self.mark = np.zeros(grown, dtype=np.int32)
            self.stack = np.empty(grown, dtype=np.int32)
            self.stamp = 1
        if self.stamp > 2**31 - 2 * len(ts) - 2:      # stamps would pass 32 bits
            self.mark[:] = 0
            self.stamp = 1
        out = np.empty(len(ts), dtype=np.int8)
        self.stamp = kernel(np.array(sends, dtype=np.int32), np.array(ts, dtype=np.int32),
                            out, np.frombuffer(self.after, dtype=np.int32),
                            np.frombuffer(self.after_ptr, dtype=np.int32),
                            np.frombuffer(self.depth, dtype=np.int32),
                            np.frombuffer(self.late, dtype=np.int32),
                            np.frombuffer(self.named, dtype=np.int32),
                            np.frombuffer(self.next_named, dtype=np.int32),
                            self.mark, self.stack[:n], self.stamp)
        return [t for t, r in zip(ts, out.tolist(), strict=True) if r]

    def reaches(self, sends: list[int], t: int) -> bool:
        """Whether one of ``sends`` waits for send ``t`` through its chain of waits: a
        search back from ``sends`` (to sends later than ``t`` with longer chains) and one
        forward from ``t`` (to sends earlier than the latest of ``sends`` with shorter
        chains than the longest), a step of each in turn, until they meet or either has
        nothing left. Each side alone settles the question; the other bounds the work by
        the smaller of the two (a list that keeps an early send checks it against sends
        whose waits go back through everything sent since, while what waits for that send
        is usually little, and the other way round).

        Both searches also keep to sends whose chains reach as late a loop iteration as
        ``t``'s and no later than the latest of ``sends``' (``late``: a send's is the
        largest of its own iteration and those of the sends it waits for, so it never
        falls along a chain, and a send off those bounds lies on no chain from ``sends``
        to ``t``). The walk runs each thread block as far as it goes, so one that waits
        for nothing sends every iteration first: by send order and chain length such a
        send looks as early and as shallow as the loop's first, and without this bound
        the searches for it went back through the iterations between (the walk's cost
        per send grew with its iterations)."""
        depth, after, ptr, late = self.depth, self.after, self.after_ptr, self.late
        named, next_named = self.named, self.next_named
        low, early = depth[t], late[t]
        starts = [b for b in sends if b > t and depth[b] > low and late[b] >= early]
        if not starts:
            return False
        high, last = max([depth[b] for b in starts]), max(starts)
        latest = max([late[b] for b in starts])
        back, ahead = set(starts), {t}
        behind, forward = list(starts), [t]
        # entries from here on are sends later than ``last``, which the search leaves out;
        # a send's entries are read latest first, so those are passed over unread
        bound = ptr[last + 1]
        while behind and forward:
            # a send's list is in ascending order (:meth:`latest` returns its sends in
            # order), and only ``t`` itself and sends later than it can be ahead of ``t``
            # or worth going back through: the entries up to ``t`` are passed over unread
            s = behind.pop()
            lo, hi = ptr[s], ptr[s + 1]
            i = bisect_right(after, t, lo, hi)
            if i > lo and after[i - 1] == t:
                return True
            for a in after[i:hi]:
                if a in ahead:
                    return True
                if depth[a] > low and late[a] >= early and a not in back:
                    back.add(a)
                    behind.append(a)
            s = forward.pop()
            e = named[s]
            while e >= bound:
                e = next_named[e]
            while e >= 0:
                w = bisect_right(ptr, e, t, last + 1) - 1    # t < w <= last here
                e = next_named[e]
                if w in back:
                    return True
                if w < last and depth[w] < high and late[w] <= latest and w not in ahead:
                    ahead.add(w)
                    forward.append(w)
        return False

    # -- sizes -----------------------------------------------------------------------
    def bytes_of(self, ref: Ref, op: Op, it: int, piped: Op | None) -> Fraction:
        key = (ref.size, op.tbg[1], None if piped is None else piped.unit_size, it)
        found = self.sized.get(key)
        if found is None:
            total = ref.size * self.chunk / op.tbg[1]
            found = total if piped is None else \
                max(Fraction(0), min(Fraction(piped.unit_size), total - it * piped.unit_size))
            self.sized[key] = found
        return found

    def pipeline_count(self, op: Op) -> int:
        n = int(-(-(op.num_chunks * self.chunk) // op.unit_size))
        return max(1, min(n, self.count))

    # -- the walk ----------------------------------------------------------------------
    def steps(self, tb: ThreadBlock) -> Iterator[tuple[Op, int, Op | None]]:
        """The timed steps of ``tb`` in order: each op, and each pipeline's timed ops once
        per iteration (with the iteration and the pipeline), produced as the walk reaches
        them rather than unrolled up front."""
        for op in tb.ops:
            if op.name == "pipeline":
                timed = [inner for inner in op.ops if inner.name in TIMED]
                if timed:
                    for it in range(self.pipeline_count(op)):
                        for inner in timed:
                            yield inner, it, op
            elif op.name in TIMED:
                yield op, 0, None

    def build(self) -> _Builder:
        plan = self.plan
        seqs: dict[tuple[int, int], Iterator[tuple[Op, int, Op | None]]] = {}
        at: dict[tuple[int, int], tuple[Op, int, Op | None] | None] = {}
        # per GPU and barrier: the thread blocks that take part in it
        takers: dict[tuple[int, int], set[int]] = defaultdict(set)
        for gpu in plan.gpus:
            for tb in gpu.tbs:
                seqs[(gpu.id, tb.id)] = self.steps(tb)
                at[(gpu.id, tb.id)] = next(seqs[(gpu.id, tb.id)], None)
                for op in tb.ops:
                    for inner in op.ops if op.name == "pipeline" else (op,):
                        if inner.name == "barrier":
                            takers[(gpu.id, inner.barrier)].add(tb.id)
        self.takers = {k: len(v) for k, v in takers.items()}
        done: dict[tuple[int, int], list[int]] = defaultdict(list)
        outbox: dict[tuple, list[int]] = defaultdict(list)
        queues: dict[tuple, deque] = defaultdict(deque)
        sems: dict[tuple[int, int], deque[list[int]]] = {
            (g.id, s): deque([[] for _ in range(v)]) for g in plan.gpus
            for s, v in enumerate(g.semaphores)}
        barriers: dict[tuple, list] = defaultdict(list)
        passed: dict[tuple, int] = defaultdict(int)
        live = [k for k in seqs if at[k] is not None]
        blocked: set[tuple[int, int]] = set()
        # passes over the thread blocks in order, each run as far as it goes; one blocked
        # on a wait is tried again only once what it waits on has changed (the same walk
        # as trying every one each pass: a step that cannot pass changes nothing)
        while live:
            moved, still = False, []
            for key in live:
                if key in blocked:
                    if key not in self.woken:
                        still.append(key)
                        continue
                    self.woken.discard(key)
                    blocked.discard(key)
                g, t = key
                tb = plan.gpus[g].tbs[t]
                seq, now = seqs[key], at[key]
                while now is not None:
                    op, it, piped = now
                    if not self.step(g, tb, op, it, piped, done, outbox, queues, sems,
                                     barriers, passed):
                        blocked.add(key)
                        for resource in self.need:
                            self.waiters[resource].append(key)
                        break
                    now = next(seq, None)
                    moved = True
                at[key] = now
                if now is not None:
                    still.append(key)
            live = still
            if live and not moved:
                raise ScheduleError("the plan's waits wait on each other (run canopy "
                                    "check-plan without --topology for where).")
        return self

    def flat(self) -> FlatProgram:
        """The sends walked, as the event loop runs them (each send's ``waits``). The walk's
        own lists (``after``, ``depth``) are let go first: the event loop does not read
        them."""
        self.after, self.after_ptr = array("i"), array("i", [0])
        self.depth, self.late = array("i"), array("i")
        self.named, self.next_named = array("i"), array("i")
        self.mark = self.stack = np.zeros(0, dtype=np.int32)
        n = len(self.conn)
        waits = np.frombuffer(self.waits, dtype=np.int32)
        ptr = np.frombuffer(self.wait_ptr, dtype=np.int32).astype(np.int64)
        pending = ptr[1:] - ptr[:-1]
        order = np.argsort(waits, kind="stable")
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(waits, minlength=n), out=dep_ptr[1:])
        return FlatProgram(self.program.connections,
                           np.frombuffer(self.conn, dtype=np.int32).astype(np.int64),
                           np.frombuffer(self.amount_of, dtype=np.int32).astype(np.int64),
                           list(self.amounts),
                           pending, dep_ptr,
                           np.repeat(np.arange(n, dtype=np.int64), pending)[order],
                           np.zeros(0, dtype=np.int64))

    def sends(self) -> Program:
        """The sends walked as a program (each send's ``waits``)."""
        sizes = list(self.amounts)
        for sid, hop in enumerate(self.conn):
            self.program.send(hop, sizes[self.amount_of[sid]],
                              self.waits[self.wait_ptr[sid]:self.wait_ptr[sid + 1]])
        return self.program

    def endpoint(self, g: int, kind: str, index: int) -> tuple[int, tuple]:
        found = self.ends.get((g, kind, index))
        if found is None:
            peers = self.plan.gpus[g].peers[kind]
            h = peers[index]
            found = self.ends[(g, kind, index)] = (h, (h, kind, g, peers[:index].count(h)))
        return found

    def puts(self, g: int, tb: ThreadBlock, op: Op, it: int, piped: Op | None
             ) -> list[tuple[list[int], int, tuple, tuple | None]]:
        """The messages of put ``op`` at iteration ``it``: per target connection its hops,
        its size (an index into ``amounts``), the outbox it joins and, for a port put with
        signal, the endpoint it signals. The same for every iteration that moves whole
        units, so those are worked out once."""
        static = self.put_targets.get((g, tb.id, id(op)))
        if static is None:
            gpu = self.plan.gpus[g]
            kind = op.channel_type if op.channel_type in ("memory", "port") else "memory"
            targets: dict[tuple, list[Ref]] = defaultdict(list)
            for n, d in enumerate(d for d in op.dst if d.buffer_id is not None):
                assert d.buffer_id is not None
                h = gpu.remote[tb.buffers[kind][d.buffer_id]][0]
                if kind == "port" and op.name in ("put", "pws", "pwsf"):
                    targets[("port", g, tb.channels["port"][op.channel_ids[n]], h)].append(d)
                else:
                    targets[("memory", g, tb.id, h)].append(d)
            # the iterations before this one move a whole unit to every destination
            whole = min((int(d.size * self.chunk / op.tbg[1] // piped.unit_size)
                         for refs in targets.values() for d in refs), default=0) \
                if piped is not None else 0
            static = self.put_targets[(g, tb.id, id(op))] = (list(targets.items()), whole)
        targets_, whole = static
        cls = -1 if it < whole else it
        found = self.put_messages.get((g, tb.id, id(op), cls))
        if found is None:
            found = []
            for target, refs in targets_:
                h = target[3]
                size = sum((self.bytes_of(d, op, it, piped) for d in refs), Fraction(0))
                hops = self.connection(target, g, h, tb)
                box = (g, tb.id, h) if target[0] == "memory" else (g, tb.id, "port", target[2])
                end = self.endpoint(g, "port", target[2])[1] \
                    if target[0] == "port" and op.name in ("pws", "pwsf") else None
                found.append((hops, self.amount(size), box, end))
            self.put_messages[(g, tb.id, id(op), cls)] = found
        return found

    def step(self, g: int, tb: ThreadBlock, op: Op, it: int, piped: Op | None,
             done: dict, outbox: dict, queues: dict, sems: dict, barriers: dict,
             passed: dict) -> bool:
        name, key = op.name, (g, tb.id)
        mine = done[key]
        gpu = self.plan.gpus[g]
        if name in PUTS:
            for hops, amount, box, end in self.puts(g, tb, op, it, piped):
                outbox[box].append(self.message(hops, amount, mine, it))
                if end is not None:
                    queues[end].append(self.latest(outbox.pop(box) + mine))
                    self.wake(end)
            return True
        if name in READS:
            got = []
            for s in op.src:
                if s.buffer_id is None:
                    continue
                h = gpu.remote[tb.buffers["memory"][s.buffer_id]][0]
                hops = self.connection(("read", h, g, tb.id), h, g, None)
                got.append(self.message(hops, self.amount(self.bytes_of(s, op, it, piped)),
                                        mine, it))
            done[key] = self.latest(mine + got)
            return True
        if name in ("signal", "rlxsignal"):
            for cid in op.channel_ids:
                index = tb.channels[op.channel_type][cid]
                h, end = self.endpoint(g, op.channel_type, index)
                box = (g, tb.id, h) if op.channel_type == "memory" else \
                    (g, tb.id, "port", index)
                sent = outbox.pop(box, []) if name == "signal" or op.channel_type == "port" \
                    else []
                queues[end].append(self.latest(sent + mine))
                self.wake(end)
            return True
        if name in ("wait", "rlxwait"):
            ends = self.wait_ends.get((g, tb.id, id(op)))
            if ends is None:
                ends = self.wait_ends[(g, tb.id, id(op))] = []
                for cid in op.channel_ids:
                    index = tb.channels[op.channel_type][cid]
                    h = gpu.peers[op.channel_type][index]
                    ends.append((g, op.channel_type, h,
                                 gpu.peers[op.channel_type][:index].count(h)))
            if any(not queues[e] for e in ends):
                self.need = [e for e in ends if not queues[e]]
                return False
            need = list(mine)
            for e in ends:
                need += queues[e].popleft()
            done[key] = self.latest(need)
            return True
        if name == "sem_acquire":
            if any(not sems[(g, sem)] for sem in op.semaphores):
                self.need = [("sem", g, sem) for sem in op.semaphores if not sems[(g, sem)]]
                return False
            need = list(mine)
            for sem in op.semaphores:
                need += sems[(g, sem)].popleft()
            done[key] = self.latest(need)
            return True
        if name == "sem_release":
            for sem in op.semaphores:
                sems[(g, sem)].append(list(mine))
                self.wake(("sem", g, sem))
            return True
        if name == "barrier":
            gen = passed[(g, tb.id, op.barrier)]
            arrived = barriers[(g, op.barrier, gen)]
            if tb.id not in [a for a, _ in arrived]:
                arrived.append((tb.id, list(mine)))
                self.wake(("barrier", g, op.barrier, gen))
            if len(arrived) < op.nblocks:
                self.need = [("barrier", g, op.barrier, gen)]
                return False
            done[key] = self.latest([s for _, sends in arrived for s in sends])
            passed[(g, tb.id, op.barrier)] += 1
            # a round every thread block of the barrier has passed is not read again
            through = (g, op.barrier, gen)
            self.through[through] += 1
            if self.through[through] == self.takers[(g, op.barrier)]:
                del barriers[through], self.through[through]
            return True
        return True          # local data ops, switch ops, nop, flush: no time


def time_plan(plan: PlanModel, topology: Topology, size: Fraction | int,
              default_latency: Fraction = DEFAULT_LATENCY_US,
              budget: int | None = MAX_MESSAGES) -> PlanTiming:
    """Simulate ``plan`` moving a buffer of ``size`` bytes on ``topology`` (see the module
    docstring). Long loops are extrapolated as :func:`canopy.engine.execution.simulate.loop_time`
    extrapolates a plan's (the same rule for every program of the execution model)."""
    size = Fraction(size)
    if size <= 0:
        raise ScheduleError("the message size must be positive.")
    count = iterations(plan, size)

    one = _Builder(plan, topology, size, 1).build()
    program = one.sends()

    def run(n: int) -> Fraction:
        return run_flat(topology, _Builder(plan, topology, size, n).build().flat(),
                        default_latency, False, None, None)

    def floor() -> Fraction:
        from canopy.engine.msccl.timing import _floor_period
        return _floor_period(program, topology, 1)

    loop = loop_time(run, count, len(program.sends), max(one.depth, default=0), floor, budget)
    return PlanTiming(loop.time_us, size, count, len(program.connections), loop.messages)
