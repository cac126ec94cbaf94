"""How long an MSCCL XML algorithm takes on a topology, in the execution model of
:mod:`canopy.engine.execution.simulate` (``canopy check-xml FILE --topology TOPO --size S``).

The XML becomes a :class:`~canopy.engine.execution.program.Program`, as the MSCCL interpreter
(microsoft/msccl ``msccl_interpreter.h``) runs it:

* **Loop iterations.** The buffer of ``size`` bytes is cut into ``nchunksperloop`` XML
  chunks; the interpreter walks each chunk in iterations of at most the protocol's chunk
  size (:data:`~canopy.engine.execution.compiler.CHUNK_BYTES`), every thread block running all its
  steps once per iteration, iterations back to back. A step moves ``cnt`` times the
  iteration's slice of a chunk. ``iterations`` overrides the count (as a smaller
  ``NCCL_BUFFSIZE`` would), slicing every chunk evenly; :func:`fastest_xml` picks it by
  the rule (:func:`canopy.engine.execution.simulate.best_depth`) and from the same quantities with
  which :func:`canopy.engine.execution.simulate.fastest` picks a plan's pipeline depth, and long
  loops are extrapolated by the same routine
  (:func:`canopy.engine.execution.extrapolation.loop_time`),
  so both time the same pipelining.
* **Connections.** Every (sender, receiver, channel) of the XML is one in-order
  connection of weight 1 (one thread block at each end). Its physical route is the one
  its sending thread block names with Canopy's ``via`` attribute (the plan's route, see
  :mod:`canopy.engine.msccl.writer`); XML without it is routed over the topology's
  shortest physical paths (:class:`~canopy.engine.network.routing.Router`, least congested given
  the bytes of the connections routed before it). A route relaying through another GPU
  is one connection per hop, each hop sent after the previous one arrived.
* **Order.** A thread block runs its steps one after the other: a step starts once the
  previous step of its thread block is done, its ``depid``/``deps`` step (same iteration)
  is done and, if it receives, its message has arrived. A step is done once it may start:
  local copies and reductions take no time, and a send hands its message to its
  connection, which streams it after the thread block's earlier sends (a thread block has
  one send connection, and the runtime's send completes once the data is in the peer's
  buffer, not when the peer has used it: the connection's latency is hidden behind its
  next message, as in :func:`canopy.engine.execution.kernel.run_program`). Messages of a
  connection match in order, iteration by iteration.

**Agreement with the plan's program.** The default export writes the connections and the
send order of the plan ``canopy compare`` times
(:func:`canopy.engine.deploy.runtime_choice.runtime_layout`), so the XML's program here is
the plan's (:func:`canopy.engine.execution.compiler.plan_program`): the same sends on the
same connections in the same order, each waiting for the same arrivals (allreduce included:
both broadcast each part of a root's shard once that part is reduced). Loop depth and
extrapolation are one routine for both
(:func:`~canopy.engine.execution.simulate.best_depth`,
:func:`~canopy.engine.execution.extrapolation.loop_time`), so the times agree to float
rounding. One runtime rule has no counterpart in the plan: a *receiving* thread block also
runs its steps in order, and a reducing receive (``rrc``) waits for the reduction before it
into the same slot (the chain that keeps two thread blocks from adding into one buffer at
once). On a connection of its own (one tree edge) that adds nothing: the sends after it wait
for those arrivals anyway, and its connection delivers in order. Where a connection carries
several trees' reductions, a receive waiting for its chain holds back the receives behind
it, which the plan does not model, so such an XML's time can differ from the plan's
(``bench/msccl_timing.py`` compares them on every sample). The MSCCL++ export therefore
orders each node's reductions as the plan's simulation delivers their data where that
brings the program to the plan's time (:mod:`canopy.engine.deploy.accumulation`); the MSCCL
XML export adds them shallow first.

Rank r runs on the topology's r-th compute node (the order exports use).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.execution.compiler import CHUNK_BYTES
from canopy.engine.execution.extrapolation import MAX_MESSAGES, PIECES_PER_STAGE, loop_time
from canopy.engine.execution.kernel import run_program
from canopy.engine.execution.program import (
    BYTES_PER_US_PER_GBPS,
    DEFAULT_LATENCY_US,
    Program,
    algbw_gbps,
)
from canopy.engine.execution.simulate import MAX_PIECES, MIN_SLICE_BYTES, best_depth
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import add_path_load, path_links
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.model import XmlAlgo, XmlStep
from canopy.engine.network.routing import Router

StepKey = tuple[int, int, int, int]            # (rank, tb, iteration, step position)


@dataclass(frozen=True)
class XmlTiming:
    """The simulated run of an XML at one message size."""

    time_us: Fraction
    message_size: Fraction
    iterations: int
    connections: int
    messages: int
    unrolled: int = 0      # iterations simulated when the rest were extrapolated, else 0

    @property
    def algbw(self) -> Fraction:
        """nccl-tests algbw in GB/s."""
        return algbw_gbps(self.message_size, self.time_us)


def _slices(algo: XmlAlgo, size: Fraction, iterations: int | None) -> list[Fraction]:
    """Bytes of one XML chunk moved in each iteration."""
    per_chunk = size / algo.nchunksperloop
    if iterations is not None:
        return [per_chunk / iterations] * iterations
    out = []
    left = per_chunk
    while left > 0:
        out.append(min(Fraction(CHUNK_BYTES), left))
        left -= out[-1]
    return out or [Fraction(0)]


class _Builder:
    """Unrolls the XML into a program (see the module docstring)."""

    def __init__(self, algo: XmlAlgo, topology: Topology, slices: list[Fraction]) -> None:
        self.algo, self.slices = algo, slices
        self.nodes = list(topology.compute_nodes())
        if len(self.nodes) != algo.ngpus:
            raise ScheduleError(f"the XML has {algo.ngpus} GPUs but the topology has "
                                f"{len(self.nodes)} compute nodes.")
        self.switches = frozenset(topology.switch_nodes())
        self.router = Router(topology)
        self.program = Program()
        self.hops: dict[tuple[int, int, int], list[int]] = {}
        self.after: list[list[int]] = []          # per send, filled before building
        self.size: list[Fraction] = []
        self.conn_of: list[list[int]] = []       # per message, its hop connections

    def route(self) -> None:
        """Physical routes of every connection. A thread block whose send carries Canopy's
        ``via`` takes that route (the plan's: what ``canopy compare`` simulated). The others
        take shortest routes chosen to spread the connections' bytes (:meth:`Router.route`,
        least congested given the fixed routes), connections with the fewest choices
        first, then each chosen again once given all the others: deterministic."""
        load: dict[tuple[int, int, int], Fraction] = defaultdict(Fraction)
        fixed: dict[tuple[int, int, int], tuple[str, ...]] = {}
        caps = self.router.capacity
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                if tb.send < 0:
                    continue
                conn = (gpu.id, tb.send, tb.chan)
                load[conn] += sum((st.cnt for st in tb.steps if st.kind.sends), 0) or 1
                if tb.via:
                    route = (self.nodes[gpu.id], *tb.via, self.nodes[tb.send])
                    bad = next((e for e in zip(route, route[1:], strict=False)
                                if e not in caps), None)
                    if bad is not None:
                        raise ScheduleError(f"rank {gpu.id} tb {tb.id}: its via route uses "
                                            f"link {bad[0]} -> {bad[1]}, which is not in the "
                                            "topology.")
                    fixed[conn] = route
        loads: dict = {}
        path: dict[tuple[int, int, int], tuple[str, ...]] = dict(fixed)
        for conn, route in fixed.items():
            add_path_load(loads, route, load[conn])
        choices = {}
        for conn in load:
            if conn in fixed:
                continue
            u, v, _ = conn
            choices[conn] = len(self.router.paths(self.nodes[u], self.nodes[v]))
            if not choices[conn]:
                raise ScheduleError(f"rank {u} ({self.nodes[u]}) cannot reach rank {v} "
                                    f"({self.nodes[v]}) in the topology.")
        order = sorted(choices, key=lambda c: (choices[c], -load[c], c))
        for again in (False, True):
            for conn in order:
                u, v, _ = conn
                if again:
                    add_path_load(loads, path[conn], -load[conn])
                best = self.router.route(self.nodes[u], self.nodes[v], loads, load[conn])
                assert best is not None, "a reachable pair has a route"
                path[conn] = best
                add_path_load(loads, best, load[conn])
        for conn in sorted(path):
            route = path[conn]
            cut = [i for i in range(1, len(route) - 1) if route[i] not in self.switches]
            bounds = [0, *cut, len(route) - 1]
            self.hops[conn] = [self.program.connect(route[a:b + 1])
                               for a, b in zip(bounds, bounds[1:], strict=False)]

    def message(self, conn: tuple[int, int, int], size: Fraction, after: list[int]) -> int:
        """A message over ``conn``: one send per hop, each after the previous one; returns
        the last (its arrival is the message's)."""
        prev = after
        sid = -1
        for hop in self.hops[conn]:
            sid = len(self.size)
            self.size.append(size)
            self.after.append(list(prev))
            self.conn_of.append([hop])
            prev = [sid]
        return sid

    def build(self) -> Program:
        self.route()
        algo = self.algo
        # Messages are created sender by sender in (iteration, step) order, which is each
        # connection's delivery order; the receivers' waits are filled in afterwards.
        sent: dict[StepKey, int] = {}
        first_hop: dict[StepKey, int] = {}
        by_conn: dict[tuple[int, int, int, int], list[int]] = defaultdict(list)
        sizes: dict[tuple[int, Fraction], Fraction] = {}     # step.cnt * piece, once each
        for gpu in algo.gpus:
            for tb in gpu.tbs:
                conn = (gpu.id, tb.send, tb.chan)
                for it, piece in enumerate(self.slices):
                    for pos, step in enumerate(tb.steps):
                        if step.kind.sends:
                            start = len(self.size)
                            size = sizes.get((step.cnt, piece))
                            if size is None:
                                size = sizes[(step.cnt, piece)] = step.cnt * piece
                            last = self.message(conn, size, [])
                            sent[(gpu.id, tb.id, it, pos)] = last
                            first_hop[(gpu.id, tb.id, it, pos)] = start
                            by_conn[(*conn, it)].append(last)
        self._wait(sent, first_hop, by_conn)
        for sid, size in enumerate(self.size):
            self.program.send(self.conn_of[sid][0], size, self.after[sid])
        return self.program

    def _latest(self, sends: list[int]) -> list[int]:
        """``sends`` with only the last of each connection: a connection delivers in order
        (each message after the one before it), so waiting for its last message is waiting
        for all of them. Keeps a thread block's accumulated waits as small as the
        connections it depends on (not growing with its steps: a receiving thread block's
        step waits for every earlier one)."""
        if len(sends) < 2:
            return list(sends)
        last: dict[int, int] = {}
        for sid in sends:
            conn = self.conn_of[sid][0]
            if last.get(conn, -1) < sid:
                last[conn] = sid
        return sorted(last.values())

    def _wait(self, sent: dict[StepKey, int], first_hop: dict[StepKey, int],
              by_conn: dict[tuple[int, int, int, int], list[int]]) -> None:
        """Fill every message's waits, walking all thread blocks in step with their
        dependencies; ``done`` holds, per step, the sends whose arrival means it is done."""
        algo = self.algo
        done: dict[StepKey, list[int]] = {}
        pointer = {(g.id, tb.id): (0, 0) for g in algo.gpus for tb in g.tbs}
        received: dict[tuple[int, int, int], int] = defaultdict(int)
        tbs = {(g.id, tb.id): tb for g in algo.gpus for tb in g.tbs}
        last_done: dict[tuple[int, int], list[int]] = defaultdict(list)
        pending = [key for key, tb in tbs.items() if tb.steps]
        while pending:
            progress = False
            waiting = []
            for key in pending:
                rank, tid = key
                tb = tbs[key]
                it, pos = pointer[key]
                while it < len(self.slices):
                    step: XmlStep = tb.steps[pos]
                    need = list(last_done[key])
                    if step.depid >= 0:
                        target = (rank, step.depid, it, step.deps)
                        if target not in done:
                            break
                        need += done[target]
                    if step.kind.receives:
                        count = received[(rank, tid, it)]
                        received[(rank, tid, it)] += 1
                        need.append(by_conn[(tb.recv, rank, tb.chan, it)][count])
                    here = (rank, tid, it, pos)
                    done[here] = self._latest(need)
                    if step.kind.sends:
                        self.after[first_hop[here]] = done[here]
                    last_done[key] = done[here]
                    progress = True
                    pos += 1
                    if pos == len(tb.steps):
                        it, pos = it + 1, 0
                pointer[key] = (it, pos)
                if it < len(self.slices):
                    waiting.append(key)
            if not progress:
                raise ScheduleError("the XML's dependencies wait on each other.")
            pending = waiting


def time_xml(algo: XmlAlgo, topology: Topology, size: Fraction | int,
             iterations: int | None = None,
             default_latency: Fraction = DEFAULT_LATENCY_US,
             budget: int | None = MAX_MESSAGES) -> XmlTiming:
    """Simulate ``algo`` moving a buffer of ``size`` bytes on ``topology``.

    A loop of more than ``budget`` messages (``None``: no limit) is extrapolated from its
    period by :func:`canopy.engine.execution.extrapolation.loop_time`, the rule
    :func:`canopy.engine.execution.simulate.simulate` applies to a plan's loop: the same runs, the
    same increments, the same floor (the busiest link's time per iteration), so an XML
    whose program is the plan's gets the plan's time. (The runtime's own slicing, whose
    last iteration may be shorter, is run in full.)
    """
    size = Fraction(size)
    if size <= 0:
        raise ScheduleError("the message size must be positive.")
    if iterations is not None and iterations < 1:
        raise ScheduleError(f"iterations must be at least 1, not {iterations}.")
    slices = _slices(algo, size, iterations)
    one = _Builder(algo, topology, slices[:1]).build()

    def run(count: int) -> Fraction:
        return run_program(topology, _Builder(algo, topology, slices[:count]).build(),
                           default_latency)

    loop = loop_time(run, len(slices), len(one.sends), _stages(one),
                     lambda: _floor_period(one, topology, 1),
                     budget if len(set(slices)) == 1 else None)
    return XmlTiming(loop.time_us, size, len(slices), len(one.connections), loop.messages,
                     loop.unrolled)


def _floor_period(program: Program, topology: Topology, iterations: int) -> Fraction:
    """The busiest link's time per iteration (µs): no loop runs its iterations faster."""
    loads: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for send in program.sends:
        for link in path_links(program.connections[send.connection].route):
            loads[link] += send.size
    caps = topology.capacities()
    return max((load / (caps[link] * BYTES_PER_US_PER_GBPS) for link, load in loads.items()),
               default=Fraction(0)) / iterations


def runtime_iterations(algo: XmlAlgo, size: Fraction | int) -> int:
    """Loop iterations the interpreter runs at ``size`` bytes with the default buffers."""
    return len(_slices(algo, Fraction(size), None))


def stages(algo: XmlAlgo, topology: Topology) -> int:
    """The longest chain of messages one loop iteration goes through (each waiting for
    the one before to arrive), as :func:`canopy.engine.execution.compiler.pipeline_stages` counts a
    plan's."""
    return _stages(_Builder(algo, topology, [Fraction(1)]).build())


def _stages(program: Program) -> int:
    sends = program.sends
    waiting = [len(send.after) for send in sends]
    unlocks: list[list[int]] = [[] for _ in sends]
    for i, send in enumerate(sends):
        for a in send.after:
            unlocks[a].append(i)
    depth = [1] * len(sends)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    while ready:
        i = ready.pop()
        for j in unlocks[i]:
            depth[j] = max(depth[j], depth[i] + 1)
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.append(j)
    return max(depth, default=0)


def fastest_xml(algo: XmlAlgo, topology: Topology, size: Fraction | int,
                default_latency: Fraction = DEFAULT_LATENCY_US) -> XmlTiming:
    """The best time over loop iteration counts, picked by
    :func:`canopy.engine.execution.simulate.best_depth`, the rule with which
    :func:`canopy.engine.execution.simulate.fastest` picks a plan's pipeline depth, from the same
    quantities: at least the runtime's own count (:func:`runtime_iterations`, as
    :func:`~canopy.engine.execution.compiler.min_pieces`), at most MAX_PIECES and slices of
    MIN_SLICE_BYTES for the largest message a step sends (as
    :func:`~canopy.engine.execution.simulate.max_pieces` for the largest tree), PIECES_PER_STAGE ·
    :func:`stages` (as :func:`~canopy.engine.execution.compiler.pipeline_stages`), and the busiest
    link's time."""
    size = Fraction(size)
    lowest = runtime_iterations(algo, size)
    largest = max((st.cnt for g in algo.gpus for tb in g.tbs for st in tb.steps
                   if st.kind.sends), default=1)
    limit = max(lowest, min(MAX_PIECES, int(largest * size / algo.nchunksperloop
                                            / MIN_SLICE_BYTES)))
    one = _Builder(algo, topology, _slices(algo, size, 1)).build()
    return best_depth(lambda n: time_xml(algo, topology, size, n, default_latency),
                      lowest, limit, PIECES_PER_STAGE * _stages(one),
                      float(_floor_period(one, topology, 1)))
