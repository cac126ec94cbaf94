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
program of a :class:`~canopy.engine.plan.CollectivePlan` (ForestColl, rings, Blink,
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
  links' start-up, tacos.txt §IV-F), which the connection hides behind its next message
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
  edges then drain at full speed (tacos-3d-rfs-2x4x8 reduce-scatter at 128 iterations:
  the former middle-of-run period gave 86 % of the bound, the full run and this
  extrapolation 97.3 %). On chains and rings it is exact or within 0.1 %, on
  ForestColl's forests within 0.1 % of the full run (tests). A loop whose increments
  have not settled by half its length is run in full, and so is a loop shorter than
  fourteen times twice its stages, unless asked for ``saturated`` (``canopy compare``'s
  baselines): then runs of an eighth, three sixteenths and a quarter of it that show
  its busiest link saturated give the rest at that link's time per iteration
  (:func:`loop_time`; Blink and TACOS at 8 x DGX A100 within 0.04 % of the full runs,
  in 43 % and 56 % of the sends). ForestColl's forests are not timed so: on mi250-2x16
  their increments dip below the link's time long after the short runs (0.35 % off).
* Compute nodes store and forward (a GPU forwards a piece once it has it whole, or
  once all its children's pieces have arrived, for reductions). ``switch_mode=
  "store-and-forward"`` makes switches do the same: every link becomes its own
  connection, each hop ``after`` the previous one.

Why it fits: NCCL/MSCCL connections are FIFO buffers between fixed peers, and the GPU's
copy engines and NVLink/PCIe/IB arbitration interleave the streams of concurrent thread
blocks at fine grain (flits, packets), which in the limit is processor sharing; pipelining
across loop iterations is how the runtime overlaps the hops of a tree. A simpler
first-come-first-served whole-message model (this module's previous version) lets a
late tree take a shared link for a whole message and starves the others; on
ForestColl's forests, which load links to capacity, that cost 17 % on 2 x DGX A100.
Grouping all trees between two GPUs on one connection (one channel per peer) is what
an unpipelined XML would do; its head-of-line blocking costs 40 % there, so every tree
edge gets its own connection.

**Numbers.** Sizes are bytes, bandwidths GB/s (10^3 bytes per µs), times µs. With
``exact=True`` the event loop runs on :class:`fractions.Fraction` and times are exact
(used by the tests); by default it runs on floats, because under processor sharing every
rate change multiplies the denominators of all remaining byte counts, so exact runs of
thousands of messages become slow. Float times agree with exact ones to about 1e-12
relative on most programs; the result is returned as a Fraction of the float. On long
pipelines over shared links the execution amplifies small differences (processor sharing
reacts to every start and finish): the ring baseline on 2 x DGX A100 at 128 MiB in 16
pieces takes 724.25 µs exactly, 731.99 µs in floats, the rounding difference growing
tenfold every 20 µs or so. Such times are good to about 1 %, whatever the arithmetic.

*Identical servers.* A program that the rotation of identical servers maps onto itself
runs folded, one send per orbit (:mod:`canopy.engine.quotient`): in exact arithmetic
the times are the whole program's; in floats they differ by that amplified rounding
(the same ring: 726.95 µs folded). The float loop is compiled
by numba when it is installed (``pip install -e '.[fast]'``; compiled once, cached on
disk): one source (:func:`_event_loop`) runs compiled or as Python, with the same
operations in the same order, so both give the same floats (tests); compiled it is
about 7x faster. A program is built as flat numpy arrays from one iteration's template
(:func:`_expand`), not as Python objects per send.

algbw follows nccl-tests: message size over collective time (GB/s = 10^9 bytes/s).
"""

from __future__ import annotations

import heapq
import math
import sys
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Protocol, TypeVar

import numpy as np

from canopy.engine.errors import ScheduleError
from canopy.engine.plan import (
    CollectivePlan,
    FlowTree,
    bandwidth_bound,
    path_links,
    tree_levels,
)
from canopy.engine.quotient import edge_permutation, fold, server_rotation
from canopy.engine.topology import Topology

DEFAULT_LATENCY_US = Fraction(1)
BYTES_PER_US_PER_GBPS = 1000          # 1 GB/s = 10^9 B/s = 10^3 B/µs
CHUNK_BYTES = 2 << 20                 # MSCCL Simple: 4 MiB buffer / 8 steps x 4 chunk steps
MIN_SLICE_BYTES = 64 << 10           # smallest message worth pipelining
MAX_PIECES = 256                      # deepest pipeline tried
MAX_MESSAGES = 30_000                 # sends unrolled per simulation; longer loops extrapolate
PIECES_PER_STAGE = 2                  # the first depth tried: 2 x stages pieces
PERIOD_TOLERANCE = Fraction(1, 100)   # successive increments of an extrapolation that agree
MIN_UNROLL = 4                        # the shortest run when extrapolating
SATURATION_SHARE = 8                  # a saturated loop's first run: 1/8 of its iterations
MIN_SATURATED = 8                     # and at least this many
SATURATED = Fraction(1, 500)          # its increment within 0.2 % of the floor: saturated
MIN_GAIN = Fraction(1, 200)           # within 0.5 % of the floor, no deeper run
REPORT_SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)
CHECK_EVERY = 1 << 12                 # events between calls of a simulation's ``check``
COMPILE_FROM = 1_000                  # sends from which float runs use the compiled loop
DELIVERY_QUEUES = 16                  # most distinct latencies whose deliveries queue apart
CUT_THROUGH = "cut-through"
STORE_AND_FORWARD = "store-and-forward"
SWITCH_MODES = (CUT_THROUGH, STORE_AND_FORWARD)


# ---------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Connection:
    """One in-order stream from ``route[0]`` to ``route[-1]`` over the links of ``route``.

    ``weight`` is how many identical parallel channels it stands for: it gets that many
    shares of every link it crosses.
    """

    route: tuple[str, ...]
    weight: Fraction = Fraction(1)


@dataclass(frozen=True)
class Send:
    """``size`` bytes over connection ``connection`` once the sends ``after`` arrived."""

    connection: int
    size: Fraction
    after: tuple[int, ...] = ()


@dataclass
class Program:
    """Connections and sends; a connection's sends are delivered in list order."""

    connections: list[Connection] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    iteration: list[int] = field(default_factory=list)   # loop iteration of each send

    def connect(self, route: tuple[str, ...], weight: Fraction = Fraction(1)) -> int:
        self.connections.append(Connection(tuple(route), Fraction(weight)))
        return len(self.connections) - 1

    def send(self, connection: int, size: Fraction, after: Sequence[int] = ()) -> int:
        self.sends.append(Send(connection, size, tuple(after)))
        return len(self.sends) - 1


@dataclass(frozen=True)
class SimulationResult:
    """Collective time (µs) of a plan at ``message_size`` bytes."""

    time_us: Fraction
    message_size: Fraction
    pieces: int
    messages: int          # sends executed (one per connection crossed per piece)
    periodic: bool = True  # the extrapolation's increments agreed (always for full runs)
    unrolled: int = 0      # iterations of the longest run when extrapolated, else 0

    @property
    def algbw(self) -> Fraction:
        """nccl-tests algbw in GB/s."""
        return algbw_gbps(self.message_size, self.time_us)


def algbw_gbps(size_bytes: Fraction | int, time_us: Fraction) -> Fraction:
    return Fraction(size_bytes) / (Fraction(time_us) * BYTES_PER_US_PER_GBPS)


def link_time(size_bytes: Fraction, bandwidth: Fraction, latency: Fraction) -> Fraction:
    """α + n/B in µs for n bytes over a link of B GB/s and α µs."""
    return latency + Fraction(size_bytes) / (bandwidth * BYTES_PER_US_PER_GBPS)


def _check_mode(switch_mode: str) -> None:
    if switch_mode not in SWITCH_MODES:
        raise ScheduleError(f"unknown switch mode '{switch_mode}'; use "
                            f"{' or '.join(SWITCH_MODES)}.")


# ---------------------------------------------------------------------------- execution


def run_program(topology: Topology, program: Program,
                default_latency: Fraction = DEFAULT_LATENCY_US, exact: bool = False,
                check: Callable[[], None] | None = None,
                arrivals: list[Fraction | float] | None = None) -> Fraction:
    """The time (µs) at which the last send of ``program`` is delivered.

    See the module docstring for the rules. ``check`` is called every CHECK_EVERY events
    and may raise (say :class:`canopy.engine.progress.Cancelled`) to stop. A list passed
    as ``arrivals`` receives every send's delivery time (indexed like ``program.sends``).
    Raises ScheduleError when a route uses a link the topology lacks or the sends wait
    on each other forever.
    """
    n = len(program.sends)
    dependents: list[list[int]] = [[] for _ in range(n)]
    for s, send in enumerate(program.sends):
        for d in send.after:
            dependents[d].append(s)
    dep_ptr = [0]
    for waiting in dependents:
        dep_ptr.append(dep_ptr[-1] + len(waiting))
    flat = _Flat(program.connections,
                 np.array([send.connection for send in program.sends], dtype=np.int64),
                 np.arange(n, dtype=np.int64), [send.size for send in program.sends],
                 np.array([len(send.after) for send in program.sends], dtype=np.int64),
                 np.array(dep_ptr, dtype=np.int64),
                 np.array([t for waiting in dependents for t in waiting], dtype=np.int64),
                 np.array(program.iteration, dtype=np.int64))
    return _run(topology, flat, default_latency, exact, check, arrivals)


@dataclass
class _Network:
    """The links a program's connections cross, as the event loop reads them: per link
    its capacity (bytes/µs), per connection its links ``conn_link[conn_ptr[c]:
    conn_ptr[c+1]]``, latency and weight, in the numbers of the run (Fractions or
    floats); ``compiled`` holds the same as numpy arrays, with the delivery queues per
    latency, once a compiled run asks for them."""

    cap: list[Any]
    conn_ptr: list[int]
    conn_link: list[int]
    alpha: list[Any]
    weight: list[Any]
    compiled: tuple[Any, ...] | None = None

    def arrays(self) -> tuple[Any, ...]:
        """(cap, conn_ptr, conn_link, alpha, lane, lanes, weight) for the compiled loop:
        deliveries queue per latency (20 % faster on TACOS); as Python the queues' scan
        at every event costs more than the heap (the same events either way)."""
        if self.compiled is None:
            latencies = sorted(set(self.alpha))
            lanes = len(latencies) if len(latencies) <= DELIVERY_QUEUES else 0
            lane_of = {a: i for i, a in enumerate(latencies[:lanes])}
            f64 = np.float64
            self.compiled = (np.array(self.cap, f64), np.array(self.conn_ptr, np.int64),
                             np.array(self.conn_link, np.int64), np.array(self.alpha, f64),
                             np.array([lane_of.get(a, -1) for a in self.alpha], np.int64),
                             lanes, np.array(self.weight, f64))
        return self.compiled


def _network(topology: Topology, connections: list[Connection], default_latency: Fraction,
             exact: bool,
             links: dict[tuple[str, str], tuple[tuple[str, str], Fraction]] | None = None
             ) -> _Network:
    """The routes of ``connections`` as link ids (see :func:`_run`). Raises ScheduleError
    for a link the topology lacks or a connection without one."""
    num: Callable[[Fraction], Fraction | float] = Fraction if exact else float
    caps = topology.capacities()
    lats = topology.latencies()
    link_id: dict[tuple[str, str], int] = {}
    cap: list = []
    conn_ptr = [0]
    conn_link: list[int] = []
    conn_alpha: list = []
    known: dict[tuple[str, ...], tuple[list[int], Any]] = {}   # per route (connections of
    # one route repeat: a tree edge's unit connections, the trees over one pair of GPUs)
    for connection in connections:
        found = known.get(connection.route)
        if found is None:
            ids: list[int] = []
            alpha = Fraction(0)
            for link in path_links(connection.route):
                if link not in caps:
                    raise ScheduleError(f"the schedule uses link {link[0]} -> {link[1]}, "
                                        "which is not in the topology.")
                key, factor = (link, 1) if links is None else links[link]
                if key not in link_id:
                    link_id[key] = len(cap)
                    cap.append(num(caps[link] * factor * BYTES_PER_US_PER_GBPS))
                ids.append(link_id[key])
                alpha += lats.get(link, default_latency)
            if not ids:
                raise ScheduleError(f"a connection from {connection.route[0]} has no link "
                                    "to cross.")
            found = known[connection.route] = (ids, num(alpha))
        conn_link.extend(found[0])
        conn_ptr.append(len(conn_link))
        conn_alpha.append(found[1])
    return _Network(cap, conn_ptr, conn_link, conn_alpha,
                    [num(connection.weight) for connection in connections])


def _run(topology: Topology, flat: _Flat, default_latency: Fraction, exact: bool,
         check: Callable[[], None] | None, arrivals: list[Fraction | float] | None,
         links: dict[tuple[str, str], tuple[tuple[str, str], Fraction]] | None = None,
         network: _Network | None = None) -> Fraction:
    """:func:`run_program` on a program in flat form: the routes become link ids
    (:func:`_network`, or ``network`` where the caller keeps them for its connections),
    then :func:`_event_loop` runs (compiled for float runs when numba is installed). A
    folded program (:mod:`canopy.engine.quotient`) gives per link its orbit's
    representative and capacity factor as ``links``."""
    net = network if network is not None else \
        _network(topology, flat.connections, default_latency, exact, links)
    n = len(flat.conn)
    if n == 0:
        return Fraction(0)
    num: Callable[[Fraction], Fraction | float] = Fraction if exact else float
    amount = [num(a) for a in flat.amounts]
    conn = flat.conn
    queue_ptr = np.zeros(len(flat.connections) + 1, dtype=np.int64)
    np.cumsum(np.bincount(conn, minlength=len(flat.connections)), out=queue_ptr[1:])
    # a stable sort of 16-bit keys is NumPy's radix sort: 5-8x faster than of int64s
    keys = conn.astype(np.uint16) if len(flat.connections) <= 1 << 16 else conn
    queue = np.argsort(keys, kind="stable")
    compiled = None if exact or n < COMPILE_FROM else _compiled_loop()
    if compiled is not None:
        if check is not None:
            check()
        times = np.zeros(n)
        _CHECK[0] = check
        try:
            end, delivered = compiled(
                *net.arrays(), conn, np.array(amount, np.float64)[flat.amount_of],
                flat.pending, flat.dep_ptr, flat.dep_idx, queue_ptr, queue, times,
                _COMPILED[1])
        finally:
            _CHECK[0] = None
            raised, _RAISED[0] = _RAISED[0], None
        if raised is not None:
            raise raised
        if arrivals is not None:
            arrivals[:] = times.tolist()
    else:
        times_list: list = [net.cap[0] * 0] * n
        size = [amount[a] for a in flat.amount_of.tolist()]
        end, delivered = _event_loop(net.cap, net.conn_ptr, net.conn_link, net.alpha,
                                     [-1] * len(net.alpha), 0, net.weight, conn.tolist(),
                                     size, flat.pending.tolist(), flat.dep_ptr.tolist(),
                                     flat.dep_idx.tolist(), queue_ptr.tolist(),
                                     queue.tolist(), times_list, check)
        if arrivals is not None:
            arrivals[:] = times_list
    if delivered != n:
        raise ScheduleError("the schedule deadlocks: some sends wait on each other.")
    return Fraction(end)


_COMPILED: list = []                                  # [loop, poll] once tried
_CHECK: list[Callable[[], None] | None] = [None]     # the running compiled loop's check
_RAISED: list[BaseException | None] = [None]          # what that check raised


def _call_check() -> None:
    """The compiled loop's ``check``, called back through ctypes: the caller's check, whose
    exception (a ctypes callback cannot raise) is kept for :func:`_run` to raise when the
    loop returns; a loop unrolls at most MAX_MESSAGES sends, so that is soon."""
    if _CHECK[0] is not None and _RAISED[0] is None:
        try:
            _CHECK[0]()
        except BaseException as exc:    # noqa: BLE001  # re-raised by _run
            _RAISED[0] = exc


def _compiled_loop() -> Callable[..., tuple[Any, int]] | None:
    """:func:`_event_loop` compiled by numba (cached on disk), or None without numba.
    Compiled, its state is held in arrays, not lists (:func:`_filled`, :func:`_copied`).

    Its check is a ctypes callback: numba types it by its signature, so the disk cache
    (keyed on the argument types) hits in the next process, where a compiled function
    passed as the check would be typed by its address and compiled anew (seconds).

    Loading the compiled loop loads numba's NumPy support, whose check for a BLAS
    imports scipy.linalg (0.16 CPU s, a tenth of ``canopy compare`` at 64 GPUs); the loop
    uses no linear algebra, so that check is made to fail (the import is blocked while
    numba's module that asks loads, then unblocked: SciPy itself stays importable)."""
    if not _COMPILED:
        blas = "scipy.linalg.cython_blas"
        blocked = blas not in sys.modules
        if blocked:
            sys.modules[blas] = None    # type: ignore[assignment]  # import raises
        try:
            import numba
            import numba.np.arraymath  # noqa: F401  # asks for a BLAS once, on import
        except ImportError:
            _COMPILED.extend([None, None])
        else:
            import ctypes
            import types
            scope = dict(_event_loop.__globals__, _filled=numba.njit(_filled_array),
                         _copied=numba.njit(_copied_array))
            loop = types.FunctionType(_event_loop.__code__, scope, "_event_loop")
            _COMPILED.extend([numba.njit(cache=True)(loop),
                              ctypes.CFUNCTYPE(None)(_call_check)])
        finally:
            if blocked:
                del sys.modules[blas]
    return _COMPILED[0]


def _filled(count: int, value: Any) -> Any:
    """``count`` copies of ``value``: a list in the Python loop; compiled, an array
    (:func:`_compiled_loop`: no bounds checks, 8-12 % faster at the same operations)."""
    return [value] * count


def _copied(values: Any) -> Any:
    """A copy of ``values`` the loop may change (a list, or compiled an array)."""
    return list(values)


def _filled_array(count: int, value: Any) -> Any:
    return np.full(count, value)


def _copied_array(values: Any) -> Any:
    return values.copy()


def _event_loop(cap: Any, cl_ptr: Any, cl_idx: Any, alpha: Any, lane: Any, lanes: int,
                weight: Any, conn: Any, size: Any, pending: Any, dep_ptr: Any, dep_idx: Any,
                q_ptr: Any, q_idx: Any, arrivals: Any, check: Callable[[], None] | None
                ) -> tuple[Any, int]:
    """The event loop of the execution model: (time of the last delivery, sends delivered).

    Per link ``cap`` (bytes/µs); per connection its links ``cl_idx[cl_ptr[c]:cl_ptr[c+1]]``,
    latency ``alpha`` and ``weight``; per send its connection, ``size``, how many sends it
    waits for (``pending``) and the sends waiting for it (``dep_idx[dep_ptr[s]:...]``);
    ``q_idx[q_ptr[c]:q_ptr[c+1]]`` are connection c's sends in order. Delivery times go
    to ``arrivals``. Numbers are Fractions or floats (lists), or numpy arrays when
    compiled by numba (:func:`_compiled_loop`); the code is the same.

    Processor sharing as in GPS: every streaming send moves at w x share of its
    bottleneck link (the one with the smallest share on its route). Each link keeps a
    virtual clock V (bytes per unit weight delivered so far at its share), so a send
    bottlenecked there finishes when V reaches its target; a change of share moves no
    send, only the link's next finish time. Events at one time are handled as a batch.

    Bookkeeping that changes no result (the same events in the same order): the sends
    streaming over a link are a linked list in the order they started (not a dict), the
    lists a batch fills are allocated once, and the events a batch schedules for its own
    time (starts, and finishes already due) wait in a list in push order for the next
    batch rather than in the heap, which orders them the same way (by sequence number,
    nothing else being due then); 1.6-2.5x faster compiled. Deliveries wait in one queue
    per distinct latency (``lane``, up to DELIVERY_QUEUES of them, compiled only; -1: the
    heap): a
    connection's deliveries fall due α after its sends finish, so each queue is in time
    order, and the next event is the earliest of the heap's and the queues' first by
    (time, sequence number), as the heap alone would give it (TACOS's timetables at
    8 x DGX A100, 1 M sends, 20 % faster compiled).
    """
    nlinks = len(cap)
    nconn = len(alpha)
    n = len(conn)
    zero = cap[0] - cap[0]
    link_weight = _filled(nlinks, zero)
    share = _copied(cap)
    clock = _filled(nlinks, zero)
    mark = _filled(nlinks, zero)
    link_version = _filled(nlinks, 0)
    members = [[(zero, 0, 0, 0)] for _ in range(nlinks)]
    for lid in range(nlinks):
        members[lid].pop()
    # The sends streaming over each link, in the order they started: a linked list over
    # the entries k of ``cl_idx`` (a connection streams one send at a time, so entry k
    # stands for its connection's current send ``who[k]`` on link ``cl_idx[k]``).
    first = _filled(nlinks, -1)
    last = _filled(nlinks, -1)
    nxt = _filled(len(cl_idx), -1)
    prv = _filled(len(cl_idx), -1)
    who = _filled(len(cl_idx), 0)
    bottleneck = _filled(n, -1)
    target = _filled(n, zero)
    version = _filled(n, 0)
    head = _copied(q_ptr[:nconn])
    busy = _filled(nconn, False)
    pend = _copied(pending)
    heap = [(zero, 0, 0, 0, 0)]
    heap.pop()
    seq = 0
    START, LINK, ARRIVE = 0, 1, 2
    touched_at = _filled(nlinks, -1)
    moved_at = _filled(n, -1)
    touched = _filled(nlinks, 0)          # per batch, with their counts
    started = _filled(nconn, 0)
    done = _filled(nconn, 0)
    moved = _filled(nconn, 0)
    arrived = _filled(n, 0)
    # Events due at the current time that the batch just handled pushed: the next batch
    # (the heap then holds nothing due before it), kept in push order, as the heap's
    # sequence numbers would order them, without a heap.
    soon = 2 * nconn + nlinks
    soon_kind = _filled(soon, 0)
    soon_x = _filled(soon, 0)
    soon_version = _filled(soon, 0)
    nsoon = 0
    # Deliveries of connections with the same latency, in the order their sends finished
    # (so in time order): per queue its first and last send, per send the next one.
    lane_first = _filled(lanes, -1)
    lane_last = _filled(lanes, -1)
    lane_next = _filled(n, -1)
    due = _filled(n, zero)
    due_seq = _filled(n, 0)
    queued = 0
    for c in range(nconn):
        if q_ptr[c] < q_ptr[c + 1]:
            s = q_idx[q_ptr[c]]
            if pend[s] == 0:
                busy[c] = True
                seq += 1
                heapq.heappush(heap, (zero, seq, START, s, 0))
    delivered = 0
    end = zero
    batch = 0
    events = 0
    now = zero
    while nsoon > 0 or len(heap) > 0 or queued > 0:
        pending_soon = nsoon
        nsoon = 0
        if pending_soon == 0:
            found = len(heap) > 0
            if found:
                now = heap[0][0]
            for k in range(lanes):
                h = lane_first[k]
                if h >= 0 and (not found or due[h] < now):
                    now = due[h]
                    found = True
        batch += 1
        taken = 0
        ntouched = 0
        nstarted = 0
        ndone = 0
        narrived = 0
        while True:
            if pending_soon > 0:
                if taken == pending_soon:
                    break
                kind = soon_kind[taken]
                x = soon_x[taken]
                item_version = soon_version[taken]
                taken += 1
            elif lanes == 0:
                if len(heap) > 0 and heap[0][0] == now:
                    item = heapq.heappop(heap)
                    kind = item[2]
                    x = item[3]
                    item_version = item[4]
                else:
                    break
            else:
                # the earliest event due now (by sequence number): the heap's or a queue's
                from_lane = -1
                first_seq = heap[0][1] if len(heap) > 0 and heap[0][0] == now else -1
                for k in range(lanes):
                    h = lane_first[k]
                    if h >= 0 and due[h] == now and (first_seq < 0 or due_seq[h] < first_seq):
                        first_seq = due_seq[h]
                        from_lane = k
                if first_seq < 0:
                    break
                if from_lane < 0:
                    item = heapq.heappop(heap)
                    kind = item[2]
                    x = item[3]
                    item_version = item[4]
                else:
                    x = lane_first[from_lane]
                    lane_first[from_lane] = lane_next[x]
                    if lane_next[x] < 0:
                        lane_last[from_lane] = -1
                    queued -= 1
                    kind = ARRIVE
                    item_version = 0
            events += 1
            if check is not None and events % CHECK_EVERY == 0:
                check()
            if kind == ARRIVE:
                arrived[narrived] = x
                narrived += 1
            elif kind == START:
                if size[x] <= 0:
                    done[ndone] = x
                    ndone += 1
                    continue
                c = conn[x]
                for k in range(cl_ptr[c], cl_ptr[c + 1]):
                    lid = cl_idx[k]
                    link_weight[lid] += weight[c]
                    who[k] = x
                    nxt[k] = -1
                    prv[k] = last[lid]
                    if last[lid] >= 0:
                        nxt[last[lid]] = k
                    else:
                        first[lid] = k
                    last[lid] = k
                    if touched_at[lid] != batch:
                        touched_at[lid] = batch
                        touched[ntouched] = lid
                        ntouched += 1
                started[nstarted] = x
                nstarted += 1
            elif item_version == link_version[x]:
                group = members[x]
                while len(group) > 0 and group[0][3] != version[group[0][2]]:
                    heapq.heappop(group)
                if len(group) == 0:
                    continue
                s = heapq.heappop(group)[2]
                version[s] += 1
                c = conn[s]
                for k in range(cl_ptr[c], cl_ptr[c + 1]):
                    lid = cl_idx[k]
                    link_weight[lid] -= weight[c]
                    if prv[k] >= 0:
                        nxt[prv[k]] = nxt[k]
                    else:
                        first[lid] = nxt[k]
                    if nxt[k] >= 0:
                        prv[nxt[k]] = prv[k]
                    else:
                        last[lid] = prv[k]
                    if touched_at[lid] != batch:
                        touched_at[lid] = batch
                        touched[ntouched] = lid
                        ntouched += 1
                if touched_at[x] != batch:
                    touched_at[x] = batch
                    touched[ntouched] = x
                    ntouched += 1
                done[ndone] = s
                ndone += 1
        nmoved = 0
        for i in range(ntouched):
            lid = touched[i]
            clock[lid] += share[lid] * (now - mark[lid])
            mark[lid] = now
            old = share[lid]
            w = link_weight[lid]
            share[lid] = cap[lid] / w if w else cap[lid]
            if share[lid] < old:
                k = first[lid]
                while k >= 0:
                    s = who[k]
                    k = nxt[k]
                    if bottleneck[s] >= 0 and share[bottleneck[s]] > share[lid] \
                            and moved_at[s] != batch:
                        moved_at[s] = batch
                        moved[nmoved] = s
                        nmoved += 1
            elif share[lid] > old:
                k = first[lid]
                while k >= 0:
                    s = who[k]
                    k = nxt[k]
                    if bottleneck[s] == lid and moved_at[s] != batch:
                        moved_at[s] = batch
                        moved[nmoved] = s
                        nmoved += 1
        for i in range(nmoved):
            s = moved[i]
            c = conn[s]
            best = cl_idx[cl_ptr[c]]
            for k in range(cl_ptr[c] + 1, cl_ptr[c + 1]):
                if share[cl_idx[k]] < share[best]:
                    best = cl_idx[k]
            old_b = bottleneck[s]
            if share[best] < share[old_b]:
                v = clock[old_b] + share[old_b] * (now - mark[old_b])
                left = (target[s] - v) * weight[c]
                if not left > 0:
                    left = zero
                if touched_at[old_b] != batch:
                    touched_at[old_b] = batch
                    touched[ntouched] = old_b
                    ntouched += 1
                version[s] += 1
                bottleneck[s] = best
                v = clock[best] + share[best] * (now - mark[best])
                target[s] = v + left / weight[c]
                seq += 1
                heapq.heappush(members[best], (target[s], seq, s, version[s]))
                if touched_at[best] != batch:
                    touched_at[best] = batch
                    touched[ntouched] = best
                    ntouched += 1
        for i in range(nstarted):
            s = started[i]
            c = conn[s]
            best = cl_idx[cl_ptr[c]]
            for k in range(cl_ptr[c] + 1, cl_ptr[c + 1]):
                if share[cl_idx[k]] < share[best]:
                    best = cl_idx[k]
            version[s] += 1
            bottleneck[s] = best
            v = clock[best] + share[best] * (now - mark[best])
            target[s] = v + size[s] / weight[c]
            seq += 1
            heapq.heappush(members[best], (target[s], seq, s, version[s]))
            if touched_at[best] != batch:
                touched_at[best] = batch
                touched[ntouched] = best
                ntouched += 1
        for i in range(ntouched):
            lid = touched[i]
            group = members[lid]
            while len(group) > 0 and (group[0][3] != version[group[0][2]]
                                      or bottleneck[group[0][2]] != lid):
                heapq.heappop(group)
            link_version[lid] += 1
            if len(group) > 0:
                at = mark[lid] + (group[0][0] - clock[lid]) / share[lid]
                seq += 1
                if at > now:
                    heapq.heappush(heap, (at, seq, LINK, lid, link_version[lid]))
                else:
                    soon_kind[nsoon] = LINK
                    soon_x[nsoon] = lid
                    soon_version[nsoon] = link_version[lid]
                    nsoon += 1
        for i in range(ndone):
            s = done[i]
            c = conn[s]
            busy[c] = False
            head[c] += 1
            if head[c] < q_ptr[c + 1]:
                t = q_idx[head[c]]
                if pend[t] == 0:
                    busy[c] = True
                    seq += 1
                    soon_kind[nsoon] = START
                    soon_x[nsoon] = t
                    nsoon += 1
            seq += 1
            if now + alpha[c] > now and lane[c] >= 0:
                k = lane[c]
                due[s] = now + alpha[c]
                due_seq[s] = seq
                if lane_last[k] >= 0:
                    lane_next[lane_last[k]] = s
                else:
                    lane_first[k] = s
                lane_last[k] = s
                queued += 1
            elif now + alpha[c] > now:
                heapq.heappush(heap, (now + alpha[c], seq, ARRIVE, s, 0))
            else:
                soon_kind[nsoon] = ARRIVE
                soon_x[nsoon] = s
                nsoon += 1
        for i in range(narrived):
            s = arrived[i]
            delivered += 1
            arrivals[s] = now
            if now > end:
                end = now
            for k in range(dep_ptr[s], dep_ptr[s + 1]):
                t = dep_idx[k]
                pend[t] -= 1
                if pend[t] == 0:
                    c = conn[t]
                    if q_idx[head[c]] == t and not busy[c]:
                        busy[c] = True
                        seq += 1
                        soon_kind[nsoon] = START
                        soon_x[nsoon] = t
                        nsoon += 1
    return end, delivered


# ---------------------------------------------------------------------------- plans


def _hops(path: tuple[str, ...], switches: frozenset[str], switch_mode: str
          ) -> list[tuple[str, ...]]:
    """The routes one tree edge's data takes, one connection each: the path cut at every
    compute node in between (GPUs store and forward) and, under store-and-forward
    switches, at every switch."""
    cut = [i for i in range(1, len(path) - 1)
           if path[i] not in switches or switch_mode == STORE_AND_FORWARD]
    bounds = [0] + cut + [len(path) - 1]
    return [path[a:b + 1] for a, b in zip(bounds, bounds[1:], strict=False)]


@dataclass
class _Flat:
    """A program as the event loop reads it: per send its connection, the index of its
    size in ``amounts``, how many sends it waits for and (CSR) the sends waiting for it;
    ``iteration`` is each send's loop iteration. Integer arrays (numpy)."""

    connections: list[Connection]
    conn: Any
    amount_of: Any
    amounts: list[Fraction]
    pending: Any
    dep_ptr: Any
    dep_idx: Any
    iteration: Any


@dataclass
class _Template:
    """One loop iteration of a plan's program as slots, one per send, in the order of the
    iteration's sends (edge order, then hop): per slot its connection, its tree, its hop
    within its tree edge and that edge's hop count; ``src``/``dst`` are the slot pairs
    of the within-iteration dependencies (``dst`` starts once ``src`` is delivered)."""

    connections: list[Connection]
    conn: Any
    tree: Any
    hop: Any
    hops: Any
    src: Any
    dst: Any
    shares: list[Fraction]
    ordered: bool
    edge: Any           # per slot its tree edge (index over all trees' edges, in order)


def _allreduce_parts(plan: CollectivePlan) -> tuple[list[FlowTree], list[FlowTree]]:
    """The reduce and broadcast trees of ``plan`` as the MSCCL export runs them
    (:mod:`canopy.engine.msccl.lowering`): every root's shard is cut at the common
    refinement of its reduce trees' and its broadcast trees' shares (each phase's trees
    in plan order, one after the other), and the broadcast of each part waits for the
    reduction of that part only (key ``("part", root, start)``), not for every
    reduction with the tree's key. Where both phases cut a shard alike (rings, Blink,
    reduce-scatter + allgather) this pairs the same trees as their keys; the allreduce
    LP's separate trees (forestcoll.txt App. E) are cut into parts. Plans with one
    phase, and timetables (``ordered_links``), keep their trees and keys."""
    if plan.ordered_links or not plan.reduce_trees or not plan.broadcast_trees:
        return list(plan.reduce_trees), list(plan.broadcast_trees)
    cuts: dict[str, set[Fraction]] = {}
    for phase in (plan.reduce_trees, plan.broadcast_trees):
        start: dict[str, Fraction] = {}
        for tree in phase:
            start[tree.root] = start.get(tree.root, Fraction(0)) + tree.share
            cuts.setdefault(tree.root, set()).add(start[tree.root])
    out: list[list[FlowTree]] = []
    for phase in (plan.reduce_trees, plan.broadcast_trees):
        parts: list[FlowTree] = []
        start = {}
        for tree in phase:
            lo = start.get(tree.root, Fraction(0))
            hi = start[tree.root] = lo + tree.share
            bounds = [lo, *sorted(c for c in cuts[tree.root] if lo < c < hi), hi]
            parts.extend(replace(tree, key=("part", tree.root, a), share=b - a)
                         for a, b in zip(bounds, bounds[1:], strict=False))
        out.append(parts)
    return out[0], out[1]


def _template(plan: CollectivePlan, switches: frozenset[str], switch_mode: str) -> _Template:
    """The connections and the within-iteration order and dependencies of ``plan`` (see
    :func:`plan_program`). Python work per tree edge is kept small: on 1024 GPUs a ring
    plan has 8 million."""
    _check_mode(switch_mode)
    reducing, broadcasting = _allreduce_parts(plan)
    trees = [*reducing, *broadcasting]
    smallest = min(t.share for t in trees)
    nphase = len(reducing)
    program = Program()
    conns: dict[Hashable, int] = {}
    shared: dict[Hashable, list[int]] = {}
    hop_cache: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    # Per tree edge (in one flat list, trees in order): its connections (one per hop),
    # and its order key (phase, step, priority, tree) or, ordered, (phase, priority, tree).
    edge_conns: list[list[int]] = []
    steps: list[int] = []
    priorities: list[Fraction] = []
    dep_from: list[int] = []          # x's first hop waits for the last hop of y:
    dep_to: list[int] = []            # pairs (y, x) of flat edge indices
    root_done: dict[Hashable, list[int]] = {}
    base = 0
    for ti, tree in enumerate(trees):
        phase = 0 if ti < nphase else 1
        weight = tree.share / smallest
        for e in tree.edges:
            routes = hop_cache.get(e.path)
            if routes is None:
                routes = hop_cache[e.path] = _hops(e.path, switches, switch_mode)
            if e.channel is None and not plan.ordered_links:
                # ("edge", ti, ei, hop): a connection of its own, never shared.
                edge_conns.append([program.connect(hop, weight) for hop in routes])
                continue
            group = ("channel", e.channel) if e.channel is not None else ("route", phase)
            ids = shared.get((group, e.path))
            if ids is None:
                ids = []
                for hop in routes:
                    ckey: Hashable = (*group, hop)
                    if ckey not in conns:
                        conns[ckey] = program.connect(hop, Fraction(1))
                    ids.append(conns[ckey])
                shared[(group, e.path)] = ids
            edge_conns.append(ids)
        if not plan.ordered_links:
            steps.extend(tree_levels(tree))
        priorities.extend(e.priority for e in tree.edges)
        # Dependencies between tree edges (same piece).
        if tree.reduce:
            # Child -> parent: waits for everything from the child's children.
            children: dict[str, list[int]] = {}
            for ei, e in enumerate(tree.edges):
                children.setdefault(e.parent, []).append(base + ei)
            for ei, e in enumerate(tree.edges):
                below = children.get(e.child)
                if below:
                    dep_from.extend(below)
                    dep_to.extend([base + ei] * len(below))
                if e.parent == tree.root:
                    root_done.setdefault(tree.key, []).append(base + ei)
        else:
            into = {e.child: base + ei for ei, e in enumerate(tree.edges)}
            for ei, e in enumerate(tree.edges):
                if e.parent != tree.root:
                    dep_from.append(into[e.parent])
                    dep_to.append(base + ei)
        base += len(tree.edges)
    # Allreduce: a key's broadcast leaves its root once the key's reduction arrived.
    base = 0
    for tree in trees:
        if not tree.reduce:
            for ei, e in enumerate(tree.edges):
                if e.parent == tree.root:
                    done = root_done.get(tree.key, [])
                    dep_from.extend(done)
                    dep_to.extend([base + ei] * len(done))
        base += len(tree.edges)
    count = len(edge_conns)
    pairs = _paired_edges(plan, trees) if plan.paired else []
    sizes = np.array([len(t.edges) for t in trees], dtype=np.int64)
    tree_of = np.repeat(np.arange(len(trees), dtype=np.int64), sizes)
    phase_of = (tree_of >= nphase).astype(np.int64)
    # ranked through the priority objects' ids: hashing a Fraction costs a modular
    # inverse, and edges share a few priority objects (the default, a timetable's ticks)
    distinct = {id(p): p for p in priorities}
    value_rank = {v: i for i, v in enumerate(sorted(set(distinct.values())))}
    rank = {i: value_rank[p] for i, p in distinct.items()}
    priority_of = np.fromiter((rank[id(p)] for p in priorities), dtype=np.int64,
                              count=len(priorities))
    keys = [np.arange(count, dtype=np.int64), tree_of, priority_of]
    if not plan.ordered_links:
        keys.append(np.array(steps, dtype=np.int64))
    keys.append(phase_of)
    order = np.lexsort(keys)
    if pairs:
        place = np.empty(count, dtype=np.int64)     # flat edge -> its place in the order
        place[order] = np.arange(count, dtype=np.int64)
        for received, sent, earlier in pairs:
            last = max(received, key=lambda x: place[x])
            for y in [last, *earlier]:
                dep_from.extend([y] * len(sent))
                dep_to.extend(sent)
    # Slots: the edges' hops in that order.
    hops_of = np.array([len(ids) for ids in edge_conns], dtype=np.int64)
    hops = hops_of[order]
    begin = np.zeros(count, dtype=np.int64)     # first slot of each edge, in order
    begin[1:] = np.cumsum(hops)[:-1]
    first = np.empty(count, dtype=np.int64)     # flat edge -> its first slot
    first[order] = begin
    width = int(hops.sum())
    conn = np.fromiter((c for x in order.tolist() for c in edge_conns[x]), dtype=np.int64,
                       count=width)
    slot_hop = np.arange(width, dtype=np.int64) - np.repeat(begin, hops)
    chain = np.nonzero(slot_hop > 0)[0]
    ys = np.array(dep_from, dtype=np.int64)
    xs = np.array(dep_to, dtype=np.int64)
    src = np.concatenate([chain - 1, first[ys] + hops_of[ys] - 1])
    dst = np.concatenate([chain, first[xs]])
    return _Template(program.connections, conn, tree_of[order].repeat(hops), slot_hop,
                     np.repeat(hops, hops), src, dst, [t.share for t in trees],
                     plan.ordered_links, order.repeat(hops))


def _paired_edges(plan: CollectivePlan, trees: list[FlowTree]
                  ) -> list[tuple[list[int], list[int], list[int]]]:
    """Per thread block of ``plan.paired`` (receive peer p, GPU v, send peer w, channel c),
    the flat indices of the tree edges it receives (p -> v on c) and sends (v -> w on c),
    and the reductions' receives its receives wait for (:func:`_reduction_chains`): every
    send waits for the last of its receives in the iteration's order, as the thread block
    runs its receives before its sends, and for those."""
    receives: dict[tuple[str, str, Hashable], list[int]] = {}
    before: dict[int, list[int]] = {}       # a reduction's receives earlier in its chain
    rank = {x: i for i, x in enumerate(plan.compute_nodes)}
    base = 0
    for tree in trees:
        for ei, e in enumerate(tree.edges):
            if e.channel is not None:
                sender, receiver = (e.child, e.parent) if tree.reduce else (e.parent, e.child)
                receives.setdefault((sender, receiver, e.channel), []).append(base + ei)
        if tree.reduce:
            before.update(_reduction_chains(tree, rank, base))
        base += len(tree.edges)
    out = []
    for p, v, w, c in plan.paired:
        received, sent = receives.get((p, v, c)), receives.get((v, w, c))
        if received and sent:
            earlier = sorted({x for y in received for x in before.get(y, [])})
            out.append((received, sent, earlier))
    return out


def _reduction_chains(tree: FlowTree, rank: dict[str, int], base: int) -> dict[int, list[int]]:
    """Per edge of a reduce tree (flat index from ``base``), the edges into the same node
    that its receive waits for: the MSCCL export accumulates a node's children shallow
    first (height, then rank; :mod:`canopy.engine.msccl.lowering`), each receive after the
    one before it into the same slot, so a thread block's receive, and the sends it runs
    after it, wait for those arrivals too."""
    height: dict[str, int] = {}
    for e in reversed(tree.edges):
        height.setdefault(e.child, 0)
        height[e.parent] = max(height.get(e.parent, 0), height[e.child] + 1)
    into: dict[str, list[tuple[int, int, int]]] = {}
    for ei, e in enumerate(tree.edges):
        into.setdefault(e.parent, []).append((height[e.child], rank[e.child], base + ei))
    out: dict[int, list[int]] = {}
    for kids in into.values():
        kids.sort()
        for j, (_, _, flat) in enumerate(kids):
            out[flat] = [k[2] for k in kids[:j]]
    return out


def _expand(template: _Template, size: Fraction, pieces: int) -> _Flat:
    """The sends of ``pieces`` loop iterations of ``template`` on ``size`` bytes, in the
    order (piece, slot) or, for ordered plans, (edge order, piece, hop)."""
    width = len(template.conn)
    piece = np.arange(pieces, dtype=np.int64)[:, None]
    if template.ordered:
        index = pieces * (np.arange(width, dtype=np.int64) - template.hop)[None, :] \
            + template.hop[None, :] + piece * template.hops[None, :]
    else:
        index = piece * width + np.arange(width, dtype=np.int64)[None, :]
    total = pieces * width
    conn = np.empty(total, dtype=np.int64)
    conn[index] = template.conn[None, :]
    amount_of = np.empty(total, dtype=np.int64)
    amount_of[index] = template.tree[None, :]
    iteration = np.empty(total, dtype=np.int64)
    iteration[index] = piece
    # The dependencies sorted by (src, dst): one iteration's pairs sorted once, which in
    # (piece, slot) order keeps every piece's sends after the last piece's; an ordered
    # plan's sends interleave the pieces, so there the whole list is sorted (one key).
    pair = np.lexsort((template.dst, template.src))
    src_all = index[:, template.src[pair]].ravel()
    dst_all = index[:, template.dst[pair]].ravel()
    if template.ordered and total * total < 1 << 62:
        dep_idx = np.sort(src_all * total + dst_all) % total
    elif template.ordered:
        dep_idx = dst_all[np.lexsort((dst_all, src_all))]
    else:
        dep_idx = dst_all
    dep_ptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(np.bincount(src_all, minlength=total), out=dep_ptr[1:])
    pending = np.bincount(dst_all, minlength=total)
    amounts = [share * size / pieces for share in template.shares]
    return _Flat(template.connections, conn, amount_of, amounts, pending, dep_ptr,
                 dep_idx, iteration)


def plan_program(plan: CollectivePlan, size: Fraction | int, pieces: int,
                 switches: frozenset[str] = frozenset(),
                 switch_mode: str = CUT_THROUGH) -> Program:
    """The program that runs ``plan`` on a message of ``size`` bytes in ``pieces``
    loop iterations.

    Connections: a tree edge whose :class:`~canopy.engine.plan.FlowEdge` names a
    ``channel`` uses that channel's connection (a ring hop carries every chain of its
    ring, in order); otherwise every tree edge has a connection of its own, weighted by
    the tree's share (a ForestColl tree of multiplicity m streams on m channels). Sends
    on a shared connection go in the order (piece, phase, step within the piece, plan
    priority), or, for ``ordered_links`` plans (a TACOS timetable), (phase, priority,
    piece). Piece p of a tree edge waits for piece p at its sender: the parent's edge
    (broadcast) or all edges into the sender (reduce); allreduce's broadcast of a key
    waits for that key's reduction into its root. A thread block of ``plan.paired``
    runs its receives before its sends, so each of its sends also waits for its last
    receive of the piece. (The simulator builds the same sends as flat arrays, from one
    iteration's template, without this object.)
    """
    flat = _expand(_template(plan, switches, switch_mode), Fraction(size), pieces)
    program = Program(list(flat.connections))
    conn, dep_ptr, dep_idx = flat.conn.tolist(), flat.dep_ptr.tolist(), flat.dep_idx.tolist()
    after: list[list[int]] = [[] for _ in conn]
    for s in range(len(conn)):
        for t in dep_idx[dep_ptr[s]:dep_ptr[s + 1]]:
            after[t].append(s)
    program.sends = [Send(c, flat.amounts[a], tuple(w))
                     for c, a, w in zip(conn, flat.amount_of.tolist(), after, strict=True)]
    program.iteration = flat.iteration.tolist()
    return program


_MEMO: tuple[Any, dict[Hashable, Any]] = (None, {})


def _memo(plan: CollectivePlan, key: Hashable, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per plan and ``key``, for the last plan asked about: a comparison
    times one plan at every size and depth, and on 1024 GPUs walking its millions of tree
    edges (template, stages, link loads) costs seconds. (The pair is replaced as a whole,
    so a thread that asks about another plan never sees this plan's facts.)"""
    global _MEMO
    memo = _MEMO
    if memo[0] is not plan:
        memo = (plan, {})
        _MEMO = memo
    facts = memo[1]
    if key not in facts:
        facts[key] = compute()
    return facts[key]


def min_pieces(plan: CollectivePlan, size: Fraction | int, chunk_bytes: int | None = CHUNK_BYTES
               ) -> int:
    """The fewest loop iterations the protocol allows: the runtime walks every XML chunk
    (the smallest tree's share, one chunk) in iterations of at most ``chunk_bytes``
    (msccl's interpreter: ``sizePerMscclChunk = count / nchunksPerLoop``, one chunk size
    per iteration; a step of ``cnt`` chunks moves ``cnt`` such slices at once), as
    :func:`canopy.engine.msccl.timing.runtime_iterations` counts an XML's."""
    if chunk_bytes is None:
        return 1
    smallest = min(t.share for t in plan.trees)
    return max(1, math.ceil(smallest * Fraction(size) / chunk_bytes))


def pipeline_stages(topology: Topology, plan: CollectivePlan,
                    switch_mode: str = CUT_THROUGH) -> int:
    """The longest chain of sends one piece goes through: tree edges from root to leaf
    (reduce then broadcast for allreduce); every link under store-and-forward switches."""
    _check_mode(switch_mode)
    switches = frozenset(topology.switch_nodes())
    return _memo(plan, ("stages", switches, switch_mode),
                 lambda: _stages(plan, switches, switch_mode))


def _stages(plan: CollectivePlan, switches: frozenset[str], switch_mode: str) -> int:
    total = 0
    hops: dict[tuple[str, ...], int] = {}     # per route (a ring plan repeats each one)
    for phase in (plan.reduce_trees, plan.broadcast_trees):
        deepest = 0
        for tree in phase:
            depth = {tree.root: 0}
            for e in tree.edges:
                n = hops.get(e.path)
                if n is None:
                    n = hops[e.path] = len(_hops(e.path, switches, switch_mode))
                depth[e.child] = depth[e.parent] + n
            deepest = max(deepest, max(depth.values()))
        total += deepest
    return total


def sends_per_piece(plan: CollectivePlan, switches: frozenset[str] = frozenset(),
                    switch_mode: str = CUT_THROUGH) -> int:
    """How many sends one loop iteration of ``plan`` has (one per connection crossed)."""
    counts: dict[tuple[str, ...], int] = {}
    total = 0
    for tree in plan.trees:
        for e in tree.edges:
            if e.path not in counts:
                counts[e.path] = len(_hops(e.path, switches, switch_mode))
            total += counts[e.path]
    return total


def simulate(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
             pieces: int = 1, default_latency: Fraction = DEFAULT_LATENCY_US,
             switch_mode: str = CUT_THROUGH, check: Callable[[], None] | None = None,
             exact: bool = False, budget: int | None = MAX_MESSAGES,
             symmetry: bool = True, saturated: bool = False) -> SimulationResult:
    """Run ``plan`` for a message of ``message_size`` bytes in ``pieces`` loop iterations.

    ``switch_mode`` is ``"cut-through"`` (default) or ``"store-and-forward"``; ``check``
    and ``exact`` as in :func:`run_program`. The protocol's chunk bound is not applied
    here (see :func:`min_pieces` and :func:`fastest`).

    A loop of more than ``budget`` sends (``None``: no limit) is extrapolated from its
    period (:func:`loop_time`; with ``saturated``, also a loop short next to its pipeline
    once its busiest link is saturated).
    ``SimulationResult.unrolled`` is the longest run (0 for a full run).

    With ``symmetry`` (default), a program invariant under the rotation of identical
    servers runs folded, one send per orbit (:mod:`canopy.engine.quotient`; same times);
    ``messages`` counts the sends executed. The choice of runs above counts the whole
    program's sends either way.
    """
    if pieces < 1:
        raise ScheduleError(f"pieces must be at least 1, not {pieces}.")
    _check_mode(switch_mode)
    size = Fraction(message_size)
    key = (id(plan), _network_key(topology), size, pieces, default_latency, switch_mode,
           exact, budget, symmetry, saturated)
    known = _RESULTS.get(key)
    if known is not None and known[0]() is plan and known[1]() is topology:
        return known[2]
    result = _simulate(topology, plan, size, pieces, default_latency, switch_mode, check,
                       exact, budget, symmetry, saturated)
    if len(_RESULTS) >= RESULTS_KEPT:
        _RESULTS.pop(next(iter(_RESULTS)))
    _RESULTS[key] = (weakref.ref(plan), weakref.ref(topology), result)
    return result


RESULTS_KEPT = 64       # simulations remembered (by plan, topology and arguments)
_RESULTS: dict[Hashable, tuple[Any, Any, SimulationResult]] = {}


def _network_key(topology: Topology) -> Hashable:
    """A topology for the memos, by identity and by content: a network edited in place
    (links, bandwidths, latencies, switches) is simulated anew."""
    return (id(topology), tuple(topology.capacities().items()),
            tuple(topology.latencies().items()), tuple(topology.switch_nodes()))


def _simulate(topology: Topology, plan: CollectivePlan, size: Fraction, pieces: int,
              default_latency: Fraction, switch_mode: str,
              check: Callable[[], None] | None, exact: bool, budget: int | None,
              symmetry: bool, saturated: bool = False) -> SimulationResult:
    """:func:`simulate` without its memo: the runs are deterministic, so a plan timed twice
    at one size and depth (``canopy compare`` times the layout :func:`canopy.engine.msccl.
    connections.runtime_schedule` chose by timing it at 1 GiB) runs once."""
    switches = frozenset(topology.switch_nodes())
    template = _memo(plan, ("template", switches, switch_mode),
                     lambda: _template(plan, switches, switch_mode))
    # the memo keeps ``topology`` alive with its fold, so its id cannot name another one
    folded = _memo(plan, ("fold", switch_mode, _network_key(topology)),
                   lambda: (topology, _folded(topology, plan, template)))[1] \
        if symmetry else None

    running, links = (template, None) if folded is None else folded
    network = _memo(plan, ("network", switch_mode, _network_key(topology), default_latency,
                           exact, folded is None),
                    lambda: (topology, _network(topology, running.connections,
                                                default_latency, exact, links)))[1]

    def run(count: int) -> Fraction:
        # a run is a whole program: the same sends asked for again (Blink's 32
        # iterations at 16 MiB are the first probe of its 256 at 128 MiB) run once
        return _memo(plan, ("run", switch_mode, _network_key(topology), default_latency,
                            exact, folded is None, size * count / pieces, count),
                     lambda: _run(topology, _expand(running, size * count / pieces, count),
                                  default_latency, exact, check, None, links, network))

    def floor() -> Fraction:
        return (bandwidth_floor(topology, plan, size) if exact
                else Fraction(_floor_us(topology, plan, size))) / pieces

    per_piece = len(template.conn)
    loop = loop_time(run, pieces, per_piece, pipeline_stages(topology, plan, switch_mode),
                     floor, budget, saturated)
    executed = loop.messages if folded is None else \
        loop.messages // per_piece * len(folded[0].conn)
    return SimulationResult(loop.time_us, size, pieces, executed, True, loop.unrolled)


@dataclass(frozen=True)
class LoopTime:
    """The time of a loop (µs), the sends executed to find it and the longest run when
    extrapolated (else 0)."""

    time_us: Fraction
    messages: int
    unrolled: int


def loop_time(run: Callable[[int], Fraction], pieces: int, per_piece: int, stages: int,
              floor: Callable[[], Fraction], budget: int | None = MAX_MESSAGES,
              saturated: bool = False) -> LoopTime:
    """The time of a loop of ``pieces`` identical iterations of ``per_piece`` sends each,
    ``run(n)`` being the time of the same loop cut after n iterations (same piece size)
    and ``floor()`` the busiest link's time per iteration. The one extrapolation rule of
    the execution model: :func:`simulate` times plans with it and
    :func:`canopy.engine.msccl.timing.time_xml` times MSCCL XML with it, so equal programs
    get equal times.

    When the loop has more than ``budget`` sends (``None``: no limit) it is not unrolled
    in full: its iterations are identical, so once the pipeline is full each further
    iteration adds the same time (the period). Loops of n = h, 2h, 4h, ... iterations
    are run, h = PIECES_PER_STAGE · ``stages`` (at least MIN_UNROLL, more if ``budget``
    allows seven times h iterations), each giving the increment (T(n) - T(n/2)) / (n/2),
    taken at least ``floor()``; once two successive increments agree within
    PERIOD_TOLERANCE, T(L) = T(n) + (L - n) · increment. Short runs would mislead:
    while the pipeline fills, the increments can agree on a period half again too slow
    (mi250-2x16 reduce-scatter: 17.7 µs per iteration from runs of 2, 4 and 8, 11.84
    from 64 on, the stages being 22). A loop shorter than fourteen times h, or whose
    increments have not settled by half its length, is run in full; with ``saturated``,
    one shorter than fourteen times h is first tried by :func:`_saturated` (which counts
    its runs' sends even where it finds no saturation).
    """
    first = max(MIN_UNROLL, PIECES_PER_STAGE * stages, (budget or 0) // max(7 * per_piece, 1))
    if budget is None or pieces * per_piece <= budget:
        return LoopTime(run(pieces), pieces * per_piece, 0)
    if pieces < 14 * first:
        short = _saturated(run, pieces, per_piece, floor) if saturated else LoopTime(
            Fraction(0), 0, 0)
        if short.unrolled:
            return short
        return LoopTime(run(pieces), short.messages + pieces * per_piece, 0)
    least = floor()
    count, time = first, run(first)
    executed = count
    steps: list[Fraction] = []
    while True:
        if 4 * count > pieces:
            return LoopTime(run(pieces), (executed + pieces) * per_piece, 0)
        longer = run(2 * count)
        executed += 2 * count
        steps.append(max(least, (longer - time) / count))
        count, time = 2 * count, longer
        if len(steps) >= 2 and abs(steps[-1] - steps[-2]) <= PERIOD_TOLERANCE * steps[-1]:
            break
    return LoopTime(time + (pieces - count) * steps[-1], executed * per_piece, count)


def _saturated(run: Callable[[int], Fraction], pieces: int, per_piece: int,
               floor: Callable[[], Fraction]) -> LoopTime:
    """The loop of ``pieces`` iterations extrapolated at the busiest link's time per
    iteration (``floor()``) where a short run shows that link saturated: runs of n, 3n/2
    and 2n iterations, n the even number nearest below ``pieces`` / SATURATION_SHARE
    (at least MIN_SATURATED), whose increments over both halves (T(3n/2) - T(n),
    T(2n) - T(3n/2), per iteration) are within PERIOD_TOLERANCE of the floor and over the
    whole window within SATURATED of it. A link busy all the time moves each further
    iteration in exactly its time, and no loop runs faster than that, so the rest of the
    loop adds ``floor()`` per iteration: T(pieces) = T(2n) + (pieces - 2n) · floor.

    This is for the loops :func:`loop_time` would otherwise run in full because they are
    short next to their pipeline (Blink's single-root trees at 256 iterations, 42
    stages; TACOS's timetables, whose pieces go back to back): at 8 x DGX A100 their
    increments reach the floor from n = 32 and n = 8, and the extrapolations differ
    from the full runs by 0.03 % and less (tests); on the samples' Blink rows by at most
    0.073 % (dgx-a100-4x8 at 1 GiB). Where the link never saturates (Blink on
    rail-leaf-spine-4x8: increments 10 % below the floor through 64 iterations, the fill
    still draining) the probes are lost: up to 9/16 of the loop on top of its full run.
    Both halves are checked, not only the window: Blink on tacos-2d-switch-8x4 at 68
    iterations runs +3.1 % and -3.1 % of the floor in them, 0.03 % over the window, and
    its loop ends 0.33 % from that extrapolation.
    Returns the runs' sends and, where the floor was not reached, ``unrolled`` 0 (the
    caller runs the loop in full)."""
    n = pieces // SATURATION_SHARE // 2 * 2
    if n < MIN_SATURATED:
        return LoopTime(Fraction(0), 0, 0)
    least = floor()
    start, middle = run(n), run(n + n // 2)

    def near(step: Fraction, tolerance: Fraction) -> bool:
        return abs(step - least) <= tolerance * least

    if not near((middle - start) / (n // 2), PERIOD_TOLERANCE):
        return LoopTime(Fraction(0), (n + n + n // 2) * per_piece, 0)
    end = run(2 * n)
    executed = (n + n + n // 2 + 2 * n) * per_piece
    if not (near((end - middle) / (n // 2), PERIOD_TOLERANCE)
            and near((end - start) / n, SATURATED)):
        return LoopTime(Fraction(0), executed, 0)
    return LoopTime(end + (pieces - 2 * n) * least, executed, 2 * n)


def _folded(topology: Topology, plan: CollectivePlan, template: _Template
            ) -> tuple[_Template, dict[tuple[str, str], tuple[tuple[str, str], Fraction]]] | None:
    """``template`` folded by the rotation of identical servers with its link classes
    (:mod:`canopy.engine.quotient`), or None when the plan is not invariant."""
    found = server_rotation(topology)
    if found is None or template.ordered:
        return None
    rotation, m = found
    edges = edge_permutation(plan, rotation)
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
    folded = _Template([template.connections[c] for c in found_fold.connections],
                       found_fold.conn, template.tree[keep], template.hop[keep],
                       template.hops[keep], found_fold.src, found_fold.dst, template.shares,
                       False, template.edge[keep])
    return folded, found_fold.links


def _floor_us(topology: Topology, plan: CollectivePlan, size: Fraction) -> float:
    """The busiest link's bytes at its bandwidth (µs), in floats (cheap)."""
    return _memo(plan, ("floor", _network_key(topology)), lambda: _congestion(topology, plan)) \
        * float(size) / BYTES_PER_US_PER_GBPS


def _congestion(topology: Topology, plan: CollectivePlan) -> float:
    """The busiest link's load per byte of message over its bandwidth (exact, as a float)."""
    return float(1 / plan_bound(topology, plan)[0])


def plan_bound(topology: Topology, plan: CollectivePlan) -> tuple[Fraction, tuple[str, str]]:
    """:func:`canopy.engine.plan.bandwidth_bound` of ``plan`` on ``topology``, kept with
    the plan's other facts (:func:`_memo`) while it is the plan being timed: TACOS's
    plan per size walks 16,000 tree edges at 64 GPUs for its floor and again for its
    row's bound."""
    return _memo(plan, ("bound", _network_key(topology)),
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


def best_depth(time_at: Callable[[int], Timed], lowest: int, limit: int, target: int,
               floor_us: float) -> Timed:
    """The depth rule of :func:`fastest`, which
    :func:`canopy.engine.msccl.timing.fastest_xml` applies to an XML's loop iterations
    too, so compare and check-xml time the same pipelining: ``time_at(n)`` times n loop
    iterations; ``target`` (within ``lowest`` .. ``limit``) is run and, unless that is
    already within MIN_GAIN of ``floor_us`` (the busiest link's time), ``limit``; the
    faster is returned."""
    pieces = min(max(lowest, target), limit)
    best = time_at(pieces)
    if pieces < limit and float(best.time_us * (1 - MIN_GAIN)) > floor_us:
        deepest = time_at(limit)
        if deepest.time_us < best.time_us:
            best = deepest
    return best


def fastest(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            default_latency: Fraction = DEFAULT_LATENCY_US, start: int = 1,
            switch_mode: str = CUT_THROUGH, check: Callable[[], None] | None = None,
            chunk_bytes: int | None = CHUNK_BYTES, saturated: bool = False
            ) -> SimulationResult:
    """The best time over pipeline depths (as a tuned runtime would pick).

    Depths run from the protocol's minimum (:func:`min_pieces`) to the most worth running
    (:func:`max_pieces`, MAX_PIECES; loops of more than MAX_MESSAGES sends are extrapolated
    from their period, :func:`simulate`). Two depths are run: ``PIECES_PER_STAGE ·
    pipeline_stages`` within that range (or ``start`` if deeper) and, unless that is
    already within MIN_GAIN of :func:`bandwidth_floor`, the most. In this model a deeper
    pipeline is never slower but for the sharing of links (α is latency, hidden behind
    the connection's next message; fill and drain shrink with the piece), so the deepest
    is the runtime's best but where a shallower one is measured faster. ``saturated``:
    as in :func:`simulate`.
    """
    lowest = min_pieces(plan, message_size, chunk_bytes)
    limit = max(lowest, min(MAX_PIECES, max_pieces(plan, message_size)))
    target = max(start, PIECES_PER_STAGE * pipeline_stages(topology, plan, switch_mode))
    return best_depth(lambda pieces: simulate(topology, plan, message_size, pieces,
                                              default_latency, switch_mode, check,
                                              saturated=saturated),
                      lowest, limit, target, _floor_us(topology, plan, Fraction(message_size)))
