"""The execution model: how long a schedule takes when run the way MSCCL runs an XML.

**What is simulated.** A :class:`Program`: sends over *connections*. A
:class:`Connection` is one (sender, receiver, channel) stream of the runtime, with the
physical ``route`` its data takes (sender, switches, receiver; a route through a compute
node is two connections) and a ``weight`` (how many identical channels it stands for,
default 1). A :class:`Send` moves ``size`` bytes over one connection once every send in
``after`` has been delivered. This is what an MSCCL XML is once its steps are unrolled
over the loop iterations: a step that receives and then sends becomes a send ``after``
the send that delivers to it; thread-block order and ``depid``/``deps`` become ``after``
edges too. :func:`run_program` executes a program; :func:`plan_program` builds the
program of a :class:`~canopy.engine.model.plan.CollectivePlan` (ForestColl, rings, Blink,
TACOS, LR rings alike), and :func:`simulate` / :func:`fastest` time a plan.

**The runtime (MSCCL's interpreter, msccl.h/prims of microsoft/msccl).**

* *Loop iterations.* The buffer is processed in loop iterations; each moves at most the
  protocol's chunk size per XML chunk (Simple: ``stepSize · MSCCL_CHUNKSTEPS`` = 512 KiB
  · 4 = :data:`CHUNK_BYTES`). A plan whose trees carry more than that per piece is cut
  into more pieces (:func:`min_pieces`); more pieces than that are a tuning choice
  (:func:`fastest`).
* *Thread blocks run iterations back to back*, so iteration i+1's first sends go out
  while iteration i is still travelling down the trees: pieces pipeline. In a program
  this is nothing but the ``after`` edges: piece i+1 of a tree edge waits only for piece
  i+1 arriving at its sender (and, on its connection, for piece i to have gone).
* *Each connection delivers in order, one message at a time.* A send starts streaming
  once its ``after`` sends have been delivered and its connection has finished streaming
  the send before it. It is delivered α = Σ α_link over its route after its last byte
  left: α per message and per link, as latency (synchronisation with the peer, the
  links' start-up, TACOS (Won et al., arXiv:2304.05301) §IV-F), which the connection hides behind
  its next message
  as the runtime's buffer slots (NCCL_STEPS) let it.
* *A link shared by several connections at once is shared among them* (processor
  sharing, not first-come-first-served whole messages): a streaming message of weight w
  gets ``w / W_l`` of every link l on its route, W_l being the summed weight of the
  messages streaming over l, and moves at the smallest of these rates (cut-through over
  switches: one stream holds its whole route). A message alone on an idle route so takes
  ``Σα + n / min B``; over one link exactly ``α + n/B``. Bandwidth a message cannot use
  because it is held back elsewhere on its route is not handed to the others (so the
  model is never optimistic about sharing; measured against max-min fair sharing, the
  work-conserving rule of credit-based fabrics, on 2 x DGX A100 at 13 pieces the times
  agree to four digits, and on mi250-2x16 allgather, whose inter-server routes cross a
  switch, at 4 and 16 pieces to twelve: ``bench/sharing.py``).
* *Long loops are extrapolated.* The iterations of a loop are identical, so once the
  pipeline is full every further iteration adds the same time (the period). A program
  of more than MAX_MESSAGES sends is not unrolled in full: whole loops of n = 2, 4, 8,
  ... iterations of the same pieces are run (longer first runs where MAX_MESSAGES
  allows), and the increment (T(n) - T(n/2)) / (n/2), never below the busiest link's
  time per iteration, is the period once two successive increments agree within 1 %;
  the remaining iterations are added at that period (:func:`simulate`). The increment of
  whole runs, not the spacing of iterations inside one run, is what a longer loop adds:
  where sources run ahead of the inner tree edges (reductions), the spacing inside a run
  is slower than the long loop's rate, because the leaves finish early and the inner
  edges then drain at full speed (a middle-of-run period underestimates such a loop's
  rate). On chains and rings it is exact or within 0.1 %, on ForestColl's forests within
  0.1 % of the full run (tests). A loop whose increments
  have not settled by half its length is run in full, and so is a loop shorter than
  fourteen times twice its stages, unless asked for ``saturated`` (``canopy compare``'s
  baselines): then runs of an eighth, three sixteenths and a quarter of it that show
  its busiest link saturated give the rest at that link's time per iteration
  (:func:`loop_time`; tests hold Blink and TACOS to the full runs). ForestColl's forests
  are not timed so: their increments can dip below the link's time long after the short
  runs.
* Compute nodes store and forward (a GPU forwards a piece once it has it whole, or
  once all its children's pieces have arrived, for reductions). ``switch_mode=
  "store-and-forward"`` makes switches do the same: every link becomes its own
  connection, each hop ``after`` the previous one.

Why it fits: NCCL/MSCCL connections are FIFO buffers between fixed peers, and the GPU's
copy engines and NVLink/PCIe/IB arbitration interleave the streams of concurrent thread
blocks at fine grain (flits, packets), which in the limit is processor sharing; pipelining
across loop iterations is how the runtime overlaps the hops of a tree. A simpler
first-come-first-served whole-message model (this module's previous version) lets a
late tree take a shared link for a whole message and starves the others, which matters
on ForestColl's forests because they load links to capacity. Grouping all trees between
two GPUs on one connection (one channel per peer) is what an unpipelined XML would do;
its head-of-line blocking is costly, so every tree edge gets its own connection.

**Numbers.** Sizes are bytes, bandwidths GB/s (10^3 bytes per µs), times µs. With
``exact=True`` the event loop runs on :class:`fractions.Fraction` and times are exact
(used by the tests); by default it runs on floats, because under processor sharing every
rate change multiplies the denominators of all remaining byte counts, so exact runs of
thousands of messages become slow. Float times agree with exact ones to about 1e-12
relative on most programs; the result is returned as a Fraction of the float. On long
pipelines over shared links the execution amplifies small differences (processor sharing
reacts to every start and finish), so a rounding difference can grow along a long
pipeline. Such times are good to about 1 %, whatever the arithmetic.

*Links of one connection each.* Where no link is on two connections' routes (TACOS's
timetables over switches unwound into rings), no rate ever changes, and the event loop's
times come from one pass over the sends in order, the same floating-point operations
(:mod:`canopy.engine.execution.exclusive`).

*Identical servers.* A program that the rotation of identical servers maps onto itself
runs folded, one send per orbit (:mod:`canopy.engine.execution.folding`): in exact arithmetic
the times are the whole program's; in floats they differ by that amplified rounding.
The float loop is compiled by numba when it is installed (``pip install -e '.[fast]'``;
compiled once, cached on disk): one source (:mod:`canopy.engine.execution.kernel`) runs
compiled or as Python, with the same operations in the same order, so both give the same
floats (tests), compiled several times faster. A program is built as flat numpy arrays
from one iteration's template
(:func:`~canopy.engine.execution.compiler.expand_template`), not as Python objects per send.

algbw follows nccl-tests: message size over collective time (GB/s = 10^9 bytes/s).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Hashable
from dataclasses import replace
from fractions import Fraction
from typing import Any, Protocol, TypeVar

import numpy as np

from canopy.engine.execution.compiler import (
    CHUNK_BYTES,
    IterationTemplate,
    expand_template,
    min_pieces,
    pipeline_stages,
    plan_memo,
    plan_template,
    tree_memo,
)
from canopy.engine.execution.critical_path import Crossings, chain_bound, chains, link_bound
from canopy.engine.execution.extrapolation import MAX_MESSAGES, PIECES_PER_STAGE, loop_time
from canopy.engine.execution.folding import edge_permutation, fold
from canopy.engine.execution.kernel import (
    PastDeadline,
    link_network,
    run_flat,
    run_iterations,
)
from canopy.engine.execution.program import (
    BYTES_PER_US_PER_GBPS,
    CUT_THROUGH,
    DEFAULT_LATENCY_US,
    SimulationResult,
    check_switch_mode,
)
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import (
    CollectivePlan,
    bandwidth_bound,
)
from canopy.engine.model.topology import Topology
from canopy.engine.network.servers import server_rotations

MIN_SLICE_BYTES = 64 << 10           # smallest message worth pipelining


MAX_PIECES = 256                      # deepest pipeline tried


MIN_GAIN = Fraction(1, 200)           # within 0.5 % of the floor, no deeper run


REPORT_SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)


def simulate(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
             pieces: int = 1, default_latency: Fraction = DEFAULT_LATENCY_US,
             switch_mode: str = CUT_THROUGH, check: Callable[[], None] | None = None,
             exact: bool = False, budget: int | None = MAX_MESSAGES,
             symmetry: bool = True, saturated: bool = False,
             deadline_us: Fraction | None = None) -> SimulationResult:
    """Run ``plan`` for a message of ``message_size`` bytes in ``pieces`` loop iterations.

    ``switch_mode`` is ``"cut-through"`` (default) or ``"store-and-forward"``; ``check``
    and ``exact`` as in :func:`run_program`. The protocol's chunk bound is not applied
    here (see :func:`min_pieces` and :func:`fastest`).

    A loop of more than ``budget`` sends (``None``: no limit) is extrapolated from its
    period (:func:`loop_time`; with ``saturated``, also a loop short next to its pipeline
    once its busiest link is saturated).
    ``SimulationResult.unrolled`` is the longest run (0 for a full run).

    With ``symmetry`` (default), a program invariant under the rotation of identical
    servers runs folded, one send per orbit (:mod:`canopy.engine.execution.folding`; same times);
    ``messages`` counts the sends executed. The choice of runs above counts the whole
    program's sends either way.

    With ``deadline_us``, a float run of the whole loop stops once it provably ends after
    that time (:func:`canopy.engine.execution.kernel.run_flat`), or is not built where
    its longest chain of sends already ends after it
    (:mod:`canopy.engine.execution.critical_path`; loops in the order (piece, slot), not
    timetables), nor, with ``saturated`` and a loop that runs unfolded, where a link's
    bytes with the chains before and after them do (:func:`_link_bound`, before any of its
    runs, short or whole): the result then has
    ``past_deadline`` set and the deadline as its time, a lower bound (not remembered as
    a time; the latest deadline a program provably ends after is, so a run asked again
    with one no later returns at once). Extrapolated loops run their short runs in full.
    """
    if pieces < 1:
        raise ScheduleError(f"pieces must be at least 1, not {pieces}.")
    check_switch_mode(switch_mode)
    size = Fraction(message_size)
    network = topology.fingerprint()
    key = (id(plan), network, size, pieces, default_latency, switch_mode,
           exact, budget, symmetry, saturated)
    known = _RESULTS.get(key)
    if known is not None and known[0]() is plan and known[1]() is topology:
        return known[2]
    same = (_program_key(topology, plan, switch_mode, symmetry), network,
            size, pieces, default_latency, switch_mode, exact, budget, saturated)
    result = _BY_PROGRAM.get(same)
    if result is None:
        if deadline_us is not None and deadline_us <= _PAST.get(same, -1):
            return SimulationResult(deadline_us, size, pieces, 0, past_deadline=True)
        try:
            result = _simulate(topology, plan, size, pieces, default_latency, switch_mode,
                               check, exact, budget, symmetry, saturated, deadline_us)
        except PastDeadline:
            assert deadline_us is not None
            _remember(_PAST, same, max(deadline_us, _PAST.pop(same, deadline_us)))
            return SimulationResult(deadline_us, size, pieces, 0, past_deadline=True)
        _remember(_BY_PROGRAM, same, result)
    _remember(_RESULTS, key, (weakref.ref(plan), weakref.ref(topology), result))
    return result


RESULTS_KEPT = 64       # simulations remembered (by plan, topology and arguments)


_RESULTS: dict[Hashable, tuple[Any, Any, SimulationResult]] = {}


_BY_PROGRAM: dict[Hashable, SimulationResult] = {}   # the same, by the program run


_PAST: dict[Hashable, Fraction] = {}   # by the program run: a deadline it provably ends after


def forget_results() -> None:
    """Forget every simulation remembered (the next run of any plan runs anew)."""
    _RESULTS.clear()
    _BY_PROGRAM.clear()
    _PAST.clear()


def _remember(memo: dict[Hashable, Any], key: Hashable, value: Any) -> None:
    """Keep ``value`` under ``key``, forgetting the oldest entry past RESULTS_KEPT."""
    if len(memo) >= RESULTS_KEPT:
        memo.pop(next(iter(memo)))
    memo[key] = value


def _program_key(topology: Topology, plan: CollectivePlan, switch_mode: str,
                 symmetry: bool) -> str:
    """A digest of everything a run of ``plan`` reads: the iteration it runs (folded where
    :func:`_simulate` folds it: slots, connections with their routes and weights,
    dependencies, shares, link classes), its pipeline stages and its busiest link's load.
    Plans that lay out the same program, as two connection layouts can that group the
    sends alike (on an allreduce that keeps no step apart, "shared" and "shared by
    phase"), are simulated once: the runs are deterministic."""
    def digest() -> str:
        template, folded = _running(topology, plan, switch_mode, symmetry)
        running, links = (template, None) if folded is None else folded
        h = hashlib.blake2b(digest_size=16)
        for array in (running.conn, running.tree, running.hop, running.hops, running.src,
                      running.dst, running.edge):
            h.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
        h.update(repr(([(c.route, c.weight) for c in running.connections], running.shares,
                       running.ordered, sorted(links.items()) if links else None,
                       pipeline_stages(topology, plan, switch_mode),
                       plan_bound(topology, plan)[0])).encode())
        return h.hexdigest()

    return plan_memo(plan, ("program", switch_mode, topology.fingerprint(), symmetry), digest)


def _running(topology: Topology, plan: CollectivePlan, switch_mode: str, symmetry: bool
             ) -> tuple[IterationTemplate, tuple[IterationTemplate, FoldedLinks] | None]:
    """The iteration ``plan`` runs and, with ``symmetry``, its fold by the rotation of
    identical servers where the plan is invariant (else None), kept with the plan."""
    switches = frozenset(topology.switch_nodes())
    template = plan_memo(plan, ("template", switches, switch_mode),
                         lambda: plan_template(plan, switches, switch_mode))
    # the memo keeps ``topology`` alive with its fold, so its id cannot name another one
    folded = plan_memo(plan, ("fold", switch_mode, topology.fingerprint()),
                       lambda: (topology, _folded(topology, plan, template)))[1] \
        if symmetry else None
    return template, folded


def _simulate(topology: Topology, plan: CollectivePlan, size: Fraction, pieces: int,
              default_latency: Fraction, switch_mode: str,
              check: Callable[[], None] | None, exact: bool, budget: int | None,
              symmetry: bool, saturated: bool = False,
              deadline_us: Fraction | None = None) -> SimulationResult:
    """:func:`simulate` without its memo: the runs are deterministic, so a plan timed twice
    at one size and depth (``canopy compare`` times the layout :func:`canopy.engine.msccl.
    connections.runtime_schedule` chose by timing it at 1 GiB) runs once."""
    network_key = topology.fingerprint()
    template, folded = _running(topology, plan, switch_mode, symmetry)
    running, links = (template, None) if folded is None else folded
    network = _network(topology, plan, running, links, default_latency, exact, switch_mode)
    if saturated and deadline_us is not None and not exact and not running.ordered and \
            folded is None and \
            _link_bound(plan, running, network, size, pieces) > float(deadline_us):
        raise PastDeadline(f"a link's bytes, with the chains before and after them, end "
                           f"past {float(deadline_us)} µs.")

    def run(count: int) -> Fraction:
        # a run is a whole program: the same sends asked for again (Blink's 32
        # iterations at 16 MiB are the first probe of its 256 at 128 MiB) run once; only
        # the whole loop's run can stop at the deadline, and it is not built where its
        # longest chain of sends already ends after it
        deadline = float(deadline_us) if deadline_us is not None and count == pieces else 0.0
        if deadline > 0 and not exact and not running.ordered and \
                _chain_bound(plan, running, network, size * count / pieces, count,
                             deadline) > deadline:
            raise PastDeadline(f"the program's longest chain of sends ends past {deadline} µs.")
        return plan_memo(plan, ("run", switch_mode, network_key, default_latency,
                         exact, folded is None, size * count / pieces, count),
                         lambda: unrolled(size * count / pieces, count, deadline))

    def unrolled(total: Fraction, count: int, deadline: float) -> Fraction:
        # links of one connection each run in one pass over the iterations, not unrolled
        once = run_iterations(running, total, count, exact, check, network, deadline)
        return once if once is not None else run_flat(
            topology, expand_template(running, total, count), default_latency, exact,
            check, None, links, network, deadline)

    def floor() -> Fraction:
        return (bandwidth_floor(topology, plan, size) if exact
                else Fraction(_floor_us(topology, plan, size))) / pieces

    per_piece = len(template.conn)
    loop = loop_time(run, pieces, per_piece, pipeline_stages(topology, plan, switch_mode),
                     floor, budget, saturated)
    executed = loop.messages if folded is None else \
        loop.messages // per_piece * len(folded[0].conn)
    return SimulationResult(loop.time_us, size, pieces, executed, True, loop.unrolled)


def _network(topology: Topology, plan: CollectivePlan, running: IterationTemplate,
             links: FoldedLinks | None, default_latency: Fraction, exact: bool,
             switch_mode: str) -> Any:
    """The links the connections of ``running`` cross (:func:`link_network`), kept with
    the plan."""
    return plan_memo(plan, ("network", switch_mode, topology.fingerprint(), default_latency,
                            exact, links is None),
                     lambda: (topology, link_network(topology, running.connections,
                                                     default_latency, exact, links)))[1]


def _chain_parts(plan: CollectivePlan, running: IterationTemplate, network: Any
                 ) -> tuple[Any, Any, Any]:
    """The levels of ``running`` (:func:`chains`) and per slot its share over its route's
    smallest capacity and its α, kept with the plan, by the identity of the iteration
    and network it keeps (no fingerprint hashed per run)."""
    def prepare() -> tuple[Any, Any, Any]:
        cap = np.array(network.cap, dtype=np.float64)
        ptr = np.array(network.conn_ptr, dtype=np.int64)
        rate = np.minimum.reduceat(cap[np.array(network.conn_link, dtype=np.int64)],
                                   ptr[:-1])
        conn = np.asarray(running.conn, dtype=np.int64)
        shares = np.array([float(share) for share in running.shares])
        return (chains(running), shares[running.tree] / rate[conn],
                np.array(network.alpha, dtype=np.float64)[conn])

    return plan_memo(plan, ("chains", id(running), id(network)), prepare)


def _chain_bound(plan: CollectivePlan, running: IterationTemplate, network: Any,
                 size: Fraction, pieces: int, deadline: float | None) -> float:
    """:func:`canopy.engine.execution.critical_path.chain_bound` of ``pieces`` iterations
    of ``running`` (on ``size`` bytes, over ``network``'s links), less a relative
    BOUND_SLACK for the floats' rounding: a lower bound on the run's time, computed until
    it passes ``deadline`` (None: in full)."""
    found, per_byte, alpha = _chain_parts(plan, running, network)
    bound = chain_bound(found, len(per_byte), per_byte * (float(size) / pieces), alpha,
                        pieces, None if deadline is None else deadline / (1 - BOUND_SLACK))
    return bound * (1 - BOUND_SLACK)


def _link_bound(plan: CollectivePlan, running: IterationTemplate, network: Any,
                size: Fraction, pieces: int) -> float:
    """:func:`canopy.engine.execution.critical_path.link_bound` of ``pieces`` iterations
    of ``running`` (an iteration not folded, in the order (piece, slot)) on ``size``
    bytes over ``network``'s links, less a relative BOUND_SLACK: a lower bound on the
    loop's time, and on :func:`loop_time`'s extrapolations of it too (each adds at least
    the busiest link's time per iteration to a shorter run, itself above its own bound,
    whose starts and tails are the same)."""
    def prepare() -> tuple[Crossings, Any]:
        conn = np.asarray(running.conn, dtype=np.int64)
        ptr = np.array(network.conn_ptr, dtype=np.int64)
        counts = np.diff(ptr)[conn]
        first = np.repeat(ptr[conn] - np.cumsum(counts) + counts, counts)
        link = np.array(network.conn_link, dtype=np.int64)[
            first + np.arange(int(counts.sum()), dtype=np.int64)]
        shares = np.array([float(share) for share in running.shares])[running.tree]
        return (Crossings(np.repeat(np.arange(len(conn), dtype=np.int64), counts), link,
                          np.array(network.cap, dtype=np.float64)), shares)

    def bound() -> float:
        found, per_byte, alpha = _chain_parts(plan, running, network)
        crossings, shares = plan_memo(plan, ("crossings", id(running), id(network)), prepare)
        piece = float(size) / pieces
        return link_bound(found, len(per_byte), per_byte * piece, alpha, shares * piece,
                          pieces, crossings) * (1 - BOUND_SLACK)

    # asked for again: the depth rule orders two runs by it, and a deadline run checks it
    return plan_memo(plan, ("link bound", id(running), id(network), size, pieces), bound)


def lower_bound(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
                pieces: int, default_latency: Fraction = DEFAULT_LATENCY_US,
                switch_mode: str = CUT_THROUGH) -> float | None:
    """The float run's lower bound of :func:`_link_bound` for ``pieces`` iterations of
    ``plan`` (µs), or None where it does not apply: a plan that runs folded, or a
    timetable (``ordered_links``)."""
    bounds = _bounds(topology, plan, message_size, default_latency, switch_mode)
    return None if bounds is None else bounds(pieces)


def _bounds(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            default_latency: Fraction, switch_mode: str) -> Callable[[int], float] | None:
    """:func:`lower_bound` as a function of the iterations, its iteration and links looked
    up once (None where it does not apply)."""
    template, folded = _running(topology, plan, switch_mode, True)
    if folded is not None or template.ordered:
        return None
    network = _network(topology, plan, template, None, default_latency, False, switch_mode)
    size = Fraction(message_size)
    return lambda pieces: _link_bound(plan, template, network, size, pieces)


BOUND_SLACK = 1e-9     # a chain bound is trusted only this far past a deadline


FoldedLinks = dict[tuple[str, str], tuple[tuple[str, str], Fraction]]


def _folded(topology: Topology, plan: CollectivePlan, template: IterationTemplate
            ) -> tuple[IterationTemplate, FoldedLinks] | None:
    """``template`` folded by the first rotation of identical servers that keeps it, with
    its link classes (:mod:`canopy.engine.execution.folding`; the rotations of
    :func:`canopy.engine.network.servers.server_rotations`, most folding first), or None
    when the plan is invariant under none."""
    if template.ordered:
        return None
    for rotation, m in _rotations(topology):
        folded = _folded_by(plan, template, rotation, m)
        if folded is not None:
            return folded
    return None


_ROTATIONS: dict[Hashable, list[tuple[dict[str, str], int]]] = {}


def _rotations(topology: Topology) -> list[tuple[dict[str, str], int]]:
    """:func:`server_rotations` of ``topology``, kept for the last few networks."""
    key = topology.fingerprint()
    if key not in _ROTATIONS:
        _remember(_ROTATIONS, key, server_rotations(topology))
    return _ROTATIONS[key]


def _folded_by(plan: CollectivePlan, template: IterationTemplate, rotation: dict[str, str],
               m: int) -> tuple[IterationTemplate, FoldedLinks] | None:
    """``template`` folded by ``rotation`` (of order m), or None when it is not invariant."""
    edges = tree_memo(plan, ("image", tuple(rotation.items())),
                      lambda: edge_permutation(plan, rotation))
    if edges is None:
        return None
    first = np.empty(len(edges), dtype=np.int64)     # per tree edge: its first slot, hops
    hops = np.empty(len(edges), dtype=np.int64)
    starts = np.nonzero(template.hop == 0)[0]
    first[template.edge[starts]] = starts
    hops[template.edge[starts]] = template.hops[starts]
    if not np.array_equal(hops[edges], hops):
        return None
    perm = first[edges[template.edge]] + template.hop
    found_fold = fold(rotation, m, perm, template.conn,
                      [c.route for c in template.connections],
                      [c.weight for c in template.connections], template.src, template.dst)
    if found_fold is None:
        return None
    keep = found_fold.keep
    folded = IterationTemplate([template.connections[c] for c in found_fold.connections],
                       found_fold.conn, template.tree[keep], template.hop[keep],
                       template.hops[keep], found_fold.src, found_fold.dst, template.shares,
                       False, template.edge[keep])
    return folded, found_fold.links


def _floor_us(topology: Topology, plan: CollectivePlan, size: Fraction) -> float:
    """The busiest link's bytes at its bandwidth (µs), in floats (cheap)."""
    congestion = tree_memo(plan, ("floor", topology.fingerprint()),
                           lambda: _congestion(topology, plan))
    return congestion * float(size) / BYTES_PER_US_PER_GBPS


def _congestion(topology: Topology, plan: CollectivePlan) -> float:
    """The busiest link's load per byte of message over its bandwidth (exact, as a float)."""
    return float(1 / plan_bound(topology, plan)[0])


def plan_bound(topology: Topology, plan: CollectivePlan) -> tuple[Fraction, tuple[str, str]]:
    """:func:`canopy.engine.model.plan.bandwidth_bound` of ``plan`` on ``topology``, kept with
    the facts of the plan's trees (:func:`tree_memo`) while it is the plan being timed: TACOS's
    plan per size walks 16,000 tree edges at 64 GPUs for its floor and again for its
    row's bound."""
    return tree_memo(plan, ("bound", topology.fingerprint()),
                     lambda: (topology, bandwidth_bound(plan, topology.capacities())))[1]


def bandwidth_floor(topology: Topology, plan: CollectivePlan, message_size: Fraction | int
                    ) -> Fraction:
    """No depth runs faster than the busiest link's bytes at its bandwidth (µs)."""
    algbw, _ = bandwidth_bound(plan, topology.capacities())
    return Fraction(message_size) / (algbw * BYTES_PER_US_PER_GBPS)


def max_pieces(plan: CollectivePlan, size: Fraction | int,
               min_slice: int = MIN_SLICE_BYTES) -> int:
    """The most loop iterations worth running: the largest tree's message stays at least
    ``min_slice`` bytes (smaller messages are the LL protocols' domain, not modelled)."""
    largest = max(t.share for t in plan.trees)
    return max(1, int(largest * Fraction(size) / min_slice))


class _Timed(Protocol):
    @property
    def time_us(self) -> Fraction: ...


Timed = TypeVar("Timed", bound=_Timed)


DEADLINE_SLACK = 1e-9     # a depth run only to beat another stops this far past its time


def best_depth(time_at: Callable[[int], Timed], lowest: int, limit: int, target: int,
               floor_us: float,
               time_within: Callable[[int, float], SimulationResult] | None = None,
               lower: Callable[[int], float | None] | None = None) -> Timed:
    """The depth rule of :func:`fastest`, which
    :func:`canopy.engine.msccl.timing.fastest_xml` applies to an XML's loop iterations
    too, so compare and check-xml time the same pipelining: ``time_at(n)`` times n loop
    iterations; ``target`` (within ``lowest`` .. ``limit``) is run and, unless that is
    already within MIN_GAIN of ``floor_us`` (the busiest link's time), ``limit``, and,
    where going deeper did not help and the best is still not within MIN_GAIN,
    ``lowest``; the fastest is returned. The fewest iterations are tried because a
    ring's steps each wait for the step before on the neighbouring GPU, so its latency
    term grows with every iteration (exactly (N - 2)·α per iteration for one ring of N
    GPUs): rings run fastest at the protocol's fewest iterations, as NCCL runs large
    messages, while trees gain from depth and need no third run.

    ``time_within(n, deadline)``, where given, times n iterations but stops once they
    provably end after ``deadline`` µs (``past_deadline``): a run that only matters if it
    beats the best so far is run that way, and where ``target`` is ``limit`` (no deeper
    run) the fewest iterations run first, so that ``target``'s run, often many times
    longer (a ring's 2 x stages iterations), stops as soon as it provably loses to them
    and is not within MIN_GAIN of the floor. The answer is the same: a stopped run is
    slower than one already made, so it could not have been the fastest, and it was not
    settled, so the rule would have gone on to the run already made.

    ``lower(n)``, where given with ``time_within``, is a lower bound on n iterations'
    time (or None): of two runs the rule makes, the one with the smaller bound, where
    both have one, is then run first in full and the other only to beat it (a pipeline
    whose fill the deeper run shortens: Blink's single-root trees), stopped before it is
    built where its bound is already past (:func:`simulate`). The answer is again the
    same: a run made second is only asked whether it beats the first, and where it
    provably does not, the first is what the rule returns (the deeper run, unless the
    other was settled, which a run slower than it and than MIN_GAIN above the floor is
    not; the fewest, unless the deeper one is faster or settled)."""
    pieces = min(max(lowest, target), limit)

    def settled(result: _Timed) -> bool:     # (a run stopped at its deadline settles nothing)
        return float(result.time_us * (1 - MIN_GAIN)) <= floor_us and \
            not getattr(result, "past_deadline", False)

    def beyond(time_us: Fraction | float) -> float:
        return float(time_us) * (1 + DEADLINE_SLACK)

    def against(first: Timed, n: int) -> SimulationResult:
        """n iterations run after ``first`` in full: stopped once they provably lose to
        it and cannot be settled."""
        assert time_within is not None
        return time_within(n, beyond(max(float(first.time_us),
                                         floor_us / float(1 - MIN_GAIN))))

    def contest(made: Timed, n: int) -> tuple[Timed, bool]:
        """The faster of ``made`` and n iterations run :func:`against` it (the later run
        on a tie), and whether that ends the rule: n's run provably loses, is settled, or
        is slower."""
        tried = against(made, n)
        if tried.past_deadline:
            return made, True
        if settled(tried):
            return tried, True                              # type: ignore[return-value]
        if made.time_us < tried.time_us:
            return made, True
        return tried, False                                 # type: ignore[return-value]

    def sooner(deep: int, other: int) -> bool:
        """Whether ``deep`` iterations' bound is below ``other``'s (both known)."""
        if lower is None or time_within is None:
            return False
        deep_bound, other_bound = lower(deep), lower(other)
        return deep_bound is not None and other_bound is not None and deep_bound < other_bound

    if lowest < pieces == limit and sooner(pieces, lowest):
        whole = time_at(pieces)
        if settled(whole):
            return whole
        assert time_within is not None
        few = time_within(lowest, beyond(whole.time_us))
        if few.past_deadline:
            return whole
        return few if few.time_us < whole.time_us else whole   # type: ignore[return-value]
    if pieces < limit and sooner(limit, pieces):
        tried, ended = contest(time_at(limit), pieces)
        if ended:
            return tried
        if lowest < pieces:
            assert time_within is not None
            few = time_within(lowest, beyond(tried.time_us))
            if not few.past_deadline and few.time_us < tried.time_us:
                return few                                  # type: ignore[return-value]
        return tried
    if time_within is not None and lowest < pieces == limit:
        return contest(time_at(lowest), pieces)[0]

    def beats(deadline: Fraction, n: int) -> Timed | None:
        """n iterations timed, or None where they provably end after ``deadline``."""
        if time_within is None:
            return time_at(n)
        result = time_within(n, beyond(deadline))
        return None if result.past_deadline else result   # type: ignore[return-value]

    best = time_at(pieces)
    deeper_helped = False
    if pieces < limit and not settled(best):
        deepest = beats(best.time_us, limit)
        if deepest is not None and deepest.time_us < best.time_us:
            best, deeper_helped = deepest, True
    if lowest < pieces and not deeper_helped and not settled(best):
        shallow = beats(best.time_us, lowest)
        if shallow is not None and shallow.time_us < best.time_us:
            best = shallow
    return best


def _depths(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            start: int, switch_mode: str, chunk_bytes: int | None, deepest: int
            ) -> tuple[int, int, int]:
    """(fewest, first tried, most) loop iterations :func:`fastest` considers."""
    lowest = min_pieces(plan, message_size, chunk_bytes)
    limit = max(lowest, min(deepest, max_pieces(plan, message_size)))
    target = max(start, PIECES_PER_STAGE * pipeline_stages(topology, plan, switch_mode))
    return lowest, target, limit


def depths(topology: Topology, plan: CollectivePlan, message_size: Fraction | int
           ) -> tuple[int, int, int]:
    """(fewest, first run, most) loop iterations :func:`fastest` (default arguments, with
    a deadline) considers: its time at the first depth is a time the plan provably
    reaches, remembered for that run."""
    lowest, target, limit = _depths(topology, plan, message_size, 1, CUT_THROUGH,
                                    CHUNK_BYTES, MAX_PIECES)
    return lowest, min(max(lowest, target), limit), limit


def fastest(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            default_latency: Fraction = DEFAULT_LATENCY_US, start: int = 1,
            switch_mode: str = CUT_THROUGH, check: Callable[[], None] | None = None,
            chunk_bytes: int | None = CHUNK_BYTES, saturated: bool = False,
            deadline_us: Fraction | None = None, deepest: int = MAX_PIECES
            ) -> SimulationResult:
    """The best time over pipeline depths (as a tuned runtime would pick).

    Depths run from the protocol's minimum (:func:`min_pieces`) to the most worth running
    (:func:`max_pieces`, MAX_PIECES; loops of more than MAX_MESSAGES sends are extrapolated
    from their period, :func:`simulate`). Two depths are run: ``PIECES_PER_STAGE ·
    pipeline_stages`` within that range (or ``start`` if deeper) and, unless that is
    already within MIN_GAIN of :func:`bandwidth_floor`, the most and, where that did not
    help, the fewest (:func:`best_depth`). For trees a deeper pipeline is rarely slower
    (α is latency, hidden behind the connection's next message; fill and drain shrink
    with the piece); for rings every iteration adds the ring's latency term, so the
    fewest is their best.
    ``saturated``: as in :func:`simulate`. With ``deadline_us``, a best time past it is
    not sought: the result then has ``past_deadline`` set and the deadline as its time
    (every depth ends after it).
    ``deepest`` replaces MAX_PIECES (``canopy compare`` goes deeper for a baseline whose
    pipeline's fill at MAX_PIECES holds it below 95 % of its bound). With ``saturated``
    the two runs are ordered by their lower bounds (:func:`lower_bound`,
    :func:`best_depth`'s ``lower``): the same answer in fewer sends.
    """
    lowest, target, limit = _depths(topology, plan, message_size, start, switch_mode,
                                    chunk_bytes, deepest)

    def time_within(pieces: int, deadline: float) -> SimulationResult:
        return simulate(topology, plan, message_size, pieces, default_latency, switch_mode,
                        check, saturated=saturated, deadline_us=Fraction(deadline))

    best = best_depth(lambda pieces: simulate(topology, plan, message_size, pieces,
                                              default_latency, switch_mode, check,
                                              saturated=saturated, deadline_us=deadline_us),
                      lowest, limit, target, _floor_us(topology, plan, Fraction(message_size)),
                      time_within if deadline_us is None else None,
                      _bounds(topology, plan, message_size, default_latency, switch_mode)
                      if saturated else None)
    if deadline_us is not None and best.time_us > deadline_us:
        return replace(best, time_us=deadline_us, past_deadline=True)
    return best
