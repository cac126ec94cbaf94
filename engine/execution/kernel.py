"""The event loop that executes a program, compiled by numba where it is installed.

:func:`run_program` runs a :class:`~canopy.engine.execution.program.Program`;
:func:`run_flat` runs one already in flat arrays (:class:`FlatProgram`), as the plan
compiler builds them. One source (:func:`_event_loop`) runs compiled or as Python with the
same operations in the same order, so both give the same floats.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from canopy.engine.execution.exclusive import (
    _exclusive_loop,
    compiled_exclusive_loop,
    exclusive_links,
)
from canopy.engine.execution.jit import cached_jit
from canopy.engine.execution.program import (
    BYTES_PER_US_PER_GBPS,
    DEFAULT_LATENCY_US,
    Connection,
    Program,
)
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import (
    path_links,
)
from canopy.engine.model.topology import Topology

CHECK_EVERY = 1 << 12                 # events between calls of a simulation's ``check``


COMPILE_FROM = 1_000                  # sends from which float runs use the compiled loop


DELIVERY_QUEUES = 16                  # most distinct latencies whose deliveries queue apart


def run_program(topology: Topology, program: Program,
                default_latency: Fraction = DEFAULT_LATENCY_US, exact: bool = False,
                check: Callable[[], None] | None = None,
                arrivals: list[Fraction | float] | None = None) -> Fraction:
    """The time (µs) at which the last send of ``program`` is delivered.

    See the module docstring for the rules. ``check`` is called every CHECK_EVERY events
    and may raise (say :class:`canopy.engine.model.progress.Cancelled`) to stop. A list passed
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
    flat = FlatProgram(program.connections,
                 np.array([send.connection for send in program.sends], dtype=np.int64),
                 np.arange(n, dtype=np.int64), [send.size for send in program.sends],
                 np.array([len(send.after) for send in program.sends], dtype=np.int64),
                 np.array(dep_ptr, dtype=np.int64),
                 np.array([t for waiting in dependents for t in waiting], dtype=np.int64),
                 np.array(program.iteration, dtype=np.int64))
    return run_flat(topology, flat, default_latency, exact, check, arrivals)


@dataclass
class _Network:
    """The links a program's connections cross, as the event loop reads them: per link
    its capacity (bytes/µs), per connection its links ``conn_link[conn_ptr[c]:
    conn_ptr[c+1]]``, latency and weight, in the numbers of the run (Fractions or
    floats), and the number of its route (connections of one route, the same links in
    the same order, have one); ``compiled`` holds the same as numpy arrays, with the
    delivery queues per latency, once a compiled run asks for them."""

    cap: list[Any]
    conn_ptr: list[int]
    conn_link: list[int]
    alpha: list[Any]
    weight: list[Any]
    route: list[int]
    compiled: tuple[Any, ...] | None = None
    exclusive: bool | None = None

    def is_exclusive(self) -> bool:
        """Whether every link is on the route of one connection only
        (:mod:`canopy.engine.execution.exclusive`), worked out once."""
        if self.exclusive is None:
            self.exclusive = exclusive_links(self.conn_link, len(self.cap))
        return self.exclusive

    def arrays(self) -> tuple[Any, ...]:
        """(cap, conn_ptr, conn_link, alpha, lane, lanes, weight, route) for the compiled loop:
        deliveries queue per latency (faster on TACOS's timetables); as Python the queues'
        scan at every event costs more than the heap (the same events either way)."""
        if self.compiled is None:
            latencies = sorted(set(self.alpha))
            lanes = len(latencies) if len(latencies) <= DELIVERY_QUEUES else 0
            lane_of = {a: i for i, a in enumerate(latencies[:lanes])}
            f64 = np.float64
            self.compiled = (np.array(self.cap, f64), np.array(self.conn_ptr, np.int64),
                             np.array(self.conn_link, np.int64), np.array(self.alpha, f64),
                             np.array([lane_of.get(a, -1) for a in self.alpha], np.int64),
                             lanes, np.array(self.weight, f64), np.array(self.route, np.int64))
        return self.compiled


def link_network(topology: Topology, connections: list[Connection], default_latency: Fraction,
                 exact: bool,
                 links: dict[tuple[str, str], tuple[tuple[str, str], Fraction]] | None = None
             ) -> _Network:
    """The routes of ``connections`` as link ids (see :func:`run_flat`). Raises ScheduleError
    for a link the topology lacks or a connection without one. Each route's links and α,
    and each link's capacity, are worked out once per network (:class:`_RouteFacts`): the
    plans a comparison times cross the same routes."""
    num: Callable[[Fraction], Fraction | float] = Fraction if exact else float
    facts = _route_facts(topology, default_latency, exact)
    link_id: dict[tuple[str, str], int] = {}
    cap: list = []
    conn_ptr = [0]
    conn_link: list[int] = []
    conn_alpha: list = []
    known: dict[tuple[str, ...], tuple[list[int], Any, int]] = {}   # per route (connections
    # of one route repeat: a tree edge's unit connections, the trees over one pair of GPUs)
    route: list[int] = []
    numbered: dict[tuple[int, ...], int] = {}    # per list of link ids (folded routes share)
    for connection in connections:
        found = known.get(connection.route)
        if found is None:
            crossed, alpha = facts.route(connection.route)
            ids: list[int] = []
            for link in crossed:
                key, factor = (link, 1) if links is None else links[link]
                if key not in link_id:
                    link_id[key] = len(cap)
                    cap.append(facts.capacity(link, factor))
                ids.append(link_id[key])
            found = known[connection.route] = (ids, alpha,
                                               numbered.setdefault(tuple(ids), len(numbered)))
        conn_link.extend(found[0])
        conn_ptr.append(len(conn_link))
        conn_alpha.append(found[1])
        route.append(found[2])
    weights = [connection.weight for connection in connections]
    weight = {i: num(w) for i, w in dict(zip(map(id, weights), weights, strict=True)).items()}
    return _Network(cap, conn_ptr, conn_link, conn_alpha,
                    list(map(weight.__getitem__, map(id, weights))), route)


class _RouteFacts:
    """Per route of one network its links and α (the sum of its links' latencies), per
    link and capacity factor its capacity in bytes/µs, in the numbers of a run (Fractions
    or floats), each worked out when first asked."""

    def __init__(self, topology: Topology, default_latency: Fraction, exact: bool) -> None:
        self.num: Callable[[Fraction], Fraction | float] = Fraction if exact else float
        self.caps = topology.capacities()
        self.lats = topology.latencies()
        self.default_latency = default_latency
        self.routes: dict[tuple[str, ...], tuple[list[tuple[str, str]], Any]] = {}
        self.scaled: dict[tuple[tuple[str, str], Any], Any] = {}

    def route(self, route: tuple[str, ...]) -> tuple[list[tuple[str, str]], Any]:
        found = self.routes.get(route)
        if found is None:
            crossed = path_links(route)
            for link in crossed:
                if link not in self.caps:
                    raise ScheduleError(f"the schedule uses link {link[0]} -> {link[1]}, "
                                        "which is not in the topology.")
            if not crossed:
                raise ScheduleError(f"a connection from {route[0]} has no link to cross.")
            alpha = Fraction(0)
            for link in crossed:
                alpha += self.lats.get(link, self.default_latency)
            found = self.routes[route] = (crossed, self.num(alpha))
        return found

    def capacity(self, link: tuple[str, str], factor: Any) -> Any:
        found = self.scaled.get((link, factor))
        if found is None:
            found = self.scaled[(link, factor)] = \
                self.num(self.caps[link] * factor * BYTES_PER_US_PER_GBPS)
        return found


_FACTS: dict[Any, _RouteFacts] = {}      # for the last few networks


def _route_facts(topology: Topology, default_latency: Fraction, exact: bool) -> _RouteFacts:
    """:class:`_RouteFacts` of ``topology`` (by its fingerprint) for the last 4 networks,
    default latencies and number types asked about."""
    key = (topology.fingerprint(), default_latency, exact)
    found = _FACTS.get(key)
    if found is None:
        if len(_FACTS) >= 4:
            _FACTS.pop(next(iter(_FACTS)))
        found = _FACTS[key] = _RouteFacts(topology, default_latency, exact)
    return found


def run_flat(topology: Topology, flat: FlatProgram, default_latency: Fraction, exact: bool,
             check: Callable[[], None] | None, arrivals: list[Fraction | float] | None,
             links: dict[tuple[str, str], tuple[tuple[str, str], Fraction]] | None = None,
             network: _Network | None = None, deadline: float = 0.0) -> Fraction:
    """:func:`run_program` on a program in flat form: the routes become link ids
    (:func:`link_network`, or ``network`` where the caller keeps them for its connections),
    then :func:`_event_loop` runs (compiled for float runs when numba is installed). A
    folded program (:mod:`canopy.engine.execution.folding`) gives per link its orbit's
    representative and capacity factor as ``links``.

    A float run with a ``deadline`` (µs, above 0) raises :class:`PastDeadline` once the
    program provably ends after it (:func:`_event_loop`)."""
    net = network if network is not None else \
        link_network(topology, flat.connections, default_latency, exact, links)
    n = len(flat.conn)
    if n == 0:
        return Fraction(0)
    num: Callable[[Fraction], Fraction | float] = Fraction if exact else float
    amount = [num(a) for a in flat.amounts]
    conn = flat.conn
    queue_ptr = np.zeros(len(flat.connections) + 1, dtype=np.int64)
    np.cumsum(np.bincount(conn, minlength=len(flat.connections)), out=queue_ptr[1:])
    # a stable sort of 16-bit keys is NumPy's radix sort, much faster than one of int64s
    keys = conn.astype(np.uint16) if len(flat.connections) <= 1 << 16 else conn
    queue = np.argsort(keys, kind="stable")
    deadline = 0.0 if exact else deadline
    per_send = None if exact else np.array(amount, np.float64)[flat.amount_of]
    if net.is_exclusive():    # a flat program is one iteration
        sizes = [amount[a] for a in flat.amount_of.tolist()] if exact else per_send
        end, delivered = _run_exclusive(net, conn, sizes, flat.pending, flat.dep_ptr,
                                        flat.dep_idx, queue_ptr, queue, 1, False, exact,
                                        check, arrivals)
        return _finished(end, delivered, n, deadline)
    unsent = _bytes_per_link(net, conn, per_send) if deadline > 0 else np.zeros(len(net.cap))
    compiled = None if exact or n < COMPILE_FROM else compiled_event_loop()
    sends = _send_records(conn, flat.pending, flat.dep_ptr)
    if compiled is not None:
        if check is not None:
            check()
        times = np.zeros(n)
        end, delivered = _checked(check, lambda: compiled(
            *net.arrays(), sends, per_send, flat.dep_idx, queue_ptr, queue,
            times,
            _COMPILED[1], deadline, unsent))
        if arrivals is not None:
            arrivals[:] = times.tolist()
    else:
        times_list: list = [net.cap[0] * 0] * n
        size = [amount[a] for a in flat.amount_of.tolist()]
        end, delivered = _event_loop(net.cap, net.conn_ptr, net.conn_link, net.alpha,
                                     [-1] * len(net.alpha), 0, net.weight, net.route,
                                     sends.tolist(), size, flat.dep_idx.tolist(),
                                     queue_ptr.tolist(), queue.tolist(), times_list, check,
                                     deadline, unsent.tolist() if deadline > 0 else net.cap)
        if arrivals is not None:
            arrivals[:] = times_list
    if delivered < 0:
        raise PastDeadline(f"the program runs past {deadline} µs.")
    if delivered != n:
        raise ScheduleError("the schedule deadlocks: some sends wait on each other.")
    return Fraction(end)


def _send_records(conn: Any, pending: Any, dep_ptr: Any) -> Any:
    """Per send s the int32s the event loop reads when a send it waits for is delivered
    (:func:`_event_loop`), from ``4 * s``: how many sends it waits for, its connection and
    where the sends waiting for it start in ``dep_idx`` (``dep_ptr[s]``), then a 0 (16
    bytes a record: none straddles two cache lines); a last record holds ``dep_ptr[n]``.
    Compiled, the loop reads one cache line per send where it read three arrays."""
    n = len(conn)
    sends = np.zeros((n + 1, 4), dtype=np.int32)
    sends[:n, 0] = pending
    sends[:n, 1] = conn
    sends[:, 2] = dep_ptr
    return sends.reshape(-1)


def _run_exclusive(net: _Network, conn: Any, size: Any, pending: Any, dep_ptr: Any,
                   dep_idx: Any, q_ptr: Any, q_idx: Any, pieces: int, ordered: bool,
                   exact: bool, check: Callable[[], None] | None,
                   arrivals: list[Fraction | float] | None) -> tuple[Any, int]:
    """:func:`canopy.engine.execution.exclusive._exclusive_loop` (``pieces`` iterations of
    the slots ``conn``, ``size`` ..., their links each on one connection): compiled for
    float runs where numba is installed, as :func:`run_flat` runs the event loop, with the
    same times."""
    n = len(conn) * pieces
    compiled = None if exact or n < COMPILE_FROM else compiled_exclusive_loop()
    if compiled is not None:
        cap, conn_ptr, conn_link, alpha, _, _, weight, _ = net.arrays()
        times = np.zeros(n)
        if check is not None:
            check()
        end, delivered = _checked(check, lambda: compiled(
            cap, conn_ptr, conn_link, alpha, weight, conn, np.array(size, np.float64),
            pending, dep_ptr, dep_idx, q_ptr, q_idx, pieces, ordered, times, _COMPILED[1],
            CHECK_EVERY))
        if arrivals is not None:
            arrivals[:] = times.tolist()
        return end, delivered
    times_list: list = [net.cap[0] * 0] * n
    end, delivered = _exclusive_loop(net.cap, net.conn_ptr, net.conn_link, net.alpha,
                                     net.weight, conn.tolist(),
                                     size if isinstance(size, list) else size.tolist(),
                                     pending.tolist(),
                                     dep_ptr.tolist(), dep_idx.tolist(), q_ptr.tolist(),
                                     q_idx.tolist(), pieces, ordered, times_list, check,
                                     CHECK_EVERY)
    if arrivals is not None:
        arrivals[:] = times_list
    return end, delivered


def _finished(end: Any, delivered: int, n: int, deadline: float) -> Fraction:
    """The end of a one-pass run of ``n`` sends (:func:`_run_exclusive`), or PastDeadline
    where it is after ``deadline`` (above 0), as the event loop would stop."""
    if deadline > 0 and end > deadline:
        raise PastDeadline(f"the program runs past {deadline} µs.")
    if delivered != n:
        raise ScheduleError("the schedule deadlocks: some sends wait on each other.")
    return Fraction(end)


def run_iterations(template: Any, size: Fraction, pieces: int, exact: bool,
                   check: Callable[[], None] | None, network: _Network,
                   deadline: float = 0.0) -> Fraction | None:
    """The end of ``pieces`` loop iterations of ``template`` (an
    :class:`~canopy.engine.execution.compiler.IterationTemplate`) on ``size`` bytes over
    ``network``, its connections' links, where every link is on one connection's route
    (one pass over the iterations, not unrolled into a flat program first); None
    elsewhere (the caller runs the unrolled program through :func:`run_flat`). A run
    ending after ``deadline`` (above 0, floats) raises PastDeadline."""
    if not network.is_exclusive():
        return None
    num: Callable[[Fraction], Fraction | float] = Fraction if exact else float
    amounts = [num(share * size / pieces) for share in template.shares]
    conn = np.asarray(template.conn, dtype=np.int64)
    src = np.asarray(template.src, dtype=np.int64)
    dst = np.asarray(template.dst, dtype=np.int64)
    width = len(conn)
    by_src = np.argsort(src, kind="stable")
    dep_ptr = np.zeros(width + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=width), out=dep_ptr[1:])
    q_ptr = np.zeros(len(network.alpha) + 1, dtype=np.int64)
    np.cumsum(np.bincount(conn, minlength=len(network.alpha)), out=q_ptr[1:])
    end, delivered = _run_exclusive(network, conn, [amounts[t] for t in template.tree.tolist()],
                                    np.bincount(dst, minlength=width), dep_ptr, dst[by_src],
                                    q_ptr, np.argsort(conn, kind="stable"), pieces,
                                    bool(template.ordered), exact, check, None)
    return _finished(end, delivered, width * pieces, 0.0 if exact else deadline)


class PastDeadline(Exception):
    """A run stopped because it provably ends after its deadline."""


def _bytes_per_link(net: _Network, conn: Any, sizes: Any) -> Any:
    """Per link the bytes all sends of a program (``conn`` and ``sizes`` per send) carry
    over it, as floats."""
    per_conn = np.bincount(conn, weights=sizes, minlength=len(net.alpha))
    _, ptr, link, *_ = net.arrays()
    return np.bincount(link, weights=np.repeat(per_conn, np.diff(ptr)), minlength=len(net.cap))


_COMPILED: list = []                                  # [loop, poll] once tried


_CHECK: list[Callable[[], None] | None] = [None]     # the running compiled loop's check


_RAISED: list[BaseException | None] = [None]          # what that check raised


def _checked(check: Callable[[], None] | None, run: Callable[[], Any]) -> Any:
    """``run()``, a compiled loop that calls back :func:`_call_check`, with ``check`` as
    that callback; what ``check`` raised is raised once the loop has returned."""
    _CHECK[0] = check
    try:
        result = run()
    finally:
        _CHECK[0] = None
        raised, _RAISED[0] = _RAISED[0], None
    if raised is not None:
        raise raised
    return result


def _call_check() -> None:
    """The compiled loop's ``check``, called back through ctypes: the caller's check, whose
    exception (a ctypes callback cannot raise) is kept for :func:`run_flat` to raise when the
    loop returns; a loop unrolls at most MAX_MESSAGES sends, so that is soon."""
    if _CHECK[0] is not None and _RAISED[0] is None:
        try:
            _CHECK[0]()
        except BaseException as exc:    # noqa: BLE001  # re-raised by run_flat
            _RAISED[0] = exc


def compiled_event_loop() -> Callable[..., tuple[Any, int]] | None:
    """:func:`_event_loop` compiled by numba (cached on disk), or None without numba.
    Compiled, its state is held in arrays, not lists (:func:`_filled`, :func:`_copied`).

    Its check is a ctypes callback: numba types it by its signature, so the disk cache
    (keyed on the argument types) hits in the next process, where a compiled function
    passed as the check would be typed by its address and compiled anew (seconds).

    The event heap's helpers (:func:`_pushed`, :func:`_popped`) are inlined where they are
    called, and the heaps of links are sifted by a closure, which numba inlines too: a
    call would count references to the arrays it is passed, atomically, at every event.
    The event heap's arrays grow outside the loop over batches for the same reason.

    Loading the compiled loop loads numba's NumPy support, whose check for a BLAS imports
    scipy.linalg (a noticeable part of a ``canopy compare`` at 64 GPUs); the loop uses no
    linear algebra, so that check is made to fail (the import is blocked while numba's
    module that asks loads, then unblocked: SciPy itself stays importable)."""
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
            inline = numba.njit(inline="always")
            scope = dict(_event_loop.__globals__, _filled=numba.njit(_filled_array),
                         _copied=numba.njit(_copied_array), _grown=numba.njit(_grown_array),
                         _pushed=inline(_pushed), _popped=inline(_popped))
            loop = types.FunctionType(_event_loop.__code__, scope, "_event_loop")
            _COMPILED.extend([cached_jit(loop),
                              ctypes.CFUNCTYPE(None)(_call_check)])
        finally:
            if blocked:
                del sys.modules[blas]
    return _COMPILED[0]


def _filled(count: int, value: Any) -> Any:
    """``count`` copies of ``value``: a list in the Python loop; compiled, an array
    (:func:`compiled_event_loop`: no bounds checks, faster at the same operations)."""
    return [value] * count


def _copied(values: Any) -> Any:
    """A copy of ``values`` the loop may change (a list, or compiled an array)."""
    return list(values)


def _grown(values: Any) -> Any:
    """``values`` followed by as many more (a list in the Python loop; compiled, an
    array)."""
    return values + values


def _grown_array(values: Any) -> Any:
    return np.concatenate((values, values))


def _filled_array(count: int, value: Any) -> Any:
    return np.full(count, value)


def _copied_array(values: Any) -> Any:
    return values.copy()


def _pushed(when: Any, order: Any, what: Any, size: int, at: Any, seq: int, x: int) -> None:
    """Adds the event (``at``, ``seq``, ``x``) to the binary heap of ``size`` events (per
    event its time ``when``, sequence number ``order`` and ``what``), ordered by (time,
    sequence number)."""
    i = size
    while i > 0:
        up = (i - 1) // 2
        if when[up] < at or (when[up] == at and order[up] < seq):
            break
        when[i] = when[up]
        order[i] = order[up]
        what[i] = what[up]
        i = up
    when[i] = at
    order[i] = seq
    what[i] = x


def _popped(when: Any, order: Any, what: Any, size: int) -> None:
    """Takes the first event out of the binary heap of ``size + 1`` events (see
    :func:`_pushed`), leaving ``size``. The smaller child is picked by arithmetic on the
    comparisons, not a branch: which one it is varies at random, and compiled, a
    mispredicted branch costs more than evaluating both comparisons (so in the heaps of
    links too)."""
    at = when[size]
    seq = order[size]
    i = 0
    while 2 * i + 1 < size:
        child = 2 * i + 1
        if child + 1 < size:
            child += (when[child + 1] < when[child]) | ((when[child + 1] == when[child]) &
                                                       (order[child + 1] < order[child]))
        if at < when[child] or (at == when[child] and seq < order[child]):
            break
        when[i] = when[child]
        order[i] = order[child]
        what[i] = what[child]
        i = child
    when[i] = at
    order[i] = seq
    what[i] = what[size]


def _event_loop(cap: Any, cl_ptr: Any, cl_idx: Any, alpha: Any, lane: Any, lanes: int,
                weight: Any, route: Any, sends: Any, size: Any, dep_idx: Any, q_ptr: Any,
                q_idx: Any, arrivals: Any,
                check: Callable[[], None] | None, deadline: Any,
                unsent: Any) -> tuple[Any, int]:
    """The event loop of the execution model: (time of the last delivery, sends delivered).

    Per link ``cap`` (bytes/µs); per connection its links ``cl_idx[cl_ptr[c]:cl_ptr[c+1]]``,
    latency ``alpha``, ``weight`` and ``route`` (one number per list of links);
    ``q_idx[q_ptr[c]:q_ptr[c+1]]`` are connection c's sends in order; per send its
    ``size`` and, from ``sends[4 * s]`` (:func:`_send_records`), how many sends it waits
    for (counted down here), its connection and where the sends waiting for it start in
    ``dep_idx`` (they end where the next send's start). Delivery times go to
    ``arrivals``. Numbers are Fractions or floats (lists), or numpy arrays when compiled
    by numba (:func:`compiled_event_loop`); the code is the same.

    With a ``deadline`` above 0, ``unsent`` holds per link the bytes of the sends that
    have not started over it: every CHECK_EVERY events, if the current time plus the
    longest of these at its link's capacity passes the deadline, the loop stops and
    returns -1 sends delivered. No send moves faster than its links' capacity (every share
    is at most the link's), so the program cannot end before that time. A run that ends
    after its deadline between two checks returns its end, so where the checks fall
    decides some runs' results: the events they count include every link finish superseded
    by a change of the link's share (when its time comes), as when those stayed in the
    event heap. They are kept apart (``ghost_when``, ``ghost_seq``), only counted while no
    check could stop the run: whenever the loop moves on to a later time T it makes sure
    that T plus the longest time last computed (the unsent bytes only fall) is not past the
    deadline, which rules out a stop at every check up to T; the first time it is (the
    longest time computed anew), the superseded finishes after the last time so cleared
    join the heap of deliveries as events that do nothing, and the checks run from there
    on as they always did.

    Processor sharing as in GPS: every streaming send moves at w x share of its
    bottleneck link (the one with the smallest share on its route). Each link keeps a
    virtual clock V (bytes per unit weight delivered so far at its share), so a send
    bottlenecked there finishes when V reaches its target; a change of share moves no
    send, only the link's next finish time. Events at one time are handled as a batch.

    Bookkeeping that changes no result (the same events in the same order, ties broken by
    sequence number): a connection streams one send at a time, so the state of a streaming
    send (bottleneck, target) is kept per connection, and start and finish events name the
    connection, not the send: the loop touches few per-send arrays, each at most a few times
    per send (compiled, on programs of a million sends, these scattered accesses are most of
    its time). Each link keeps a binary heap of the connections it bottlenecks by (target,
    sequence number), indexed (a connection's place in it is known), so a connection that
    moves to another bottleneck leaves it at once and its first entry is always live. When
    a batch lowers a link's share, the connections crossing it whose bottleneck had a
    larger share then, and when it raises it, those it bottlenecks, look for their
    bottleneck again (the first link of the route with the smallest share, taken if
    smaller than their bottleneck's). Those that move take their sequence numbers in the
    order of the link (in the batch's order of links) that found them first, then of when
    their sends started. Whether one moves depends on its route and bottleneck only, so the
    links count per route the connections they bottleneck and the batch looks at those
    pairs of route and link, and walks a heap for the connections only where they move.
    The links' next finishes are a binary heap by (time, sequence number) with one entry per
    link, indexed, moved in place when a batch changes the link's next finish (no stale
    entries); deliveries due later are another, in arrays that grow. The lists a batch
    fills are allocated once, and the
    events a batch schedules for its own time (starts, and finishes already due) wait in a
    list in push order for the next batch rather than in the heap, which orders them the
    same way (by sequence number, nothing else being due then). Deliveries wait in one queue
    per distinct latency (``lane``, up to DELIVERY_QUEUES of them, compiled only; -1: the
    heap), entries appended in the order the sends finished: a connection's deliveries fall
    due α after its sends finish, so each queue is in time order, and the next event is the
    earliest of the heaps' and the queues' first by (time, sequence number), as one heap
    would give it (faster compiled on TACOS's timetables, with their millions of sends).
    """
    nlinks = len(cap)
    nconn = len(alpha)
    n = len(q_idx)
    zero = cap[0] - cap[0]
    link_weight = _filled(nlinks, zero)
    share = _copied(cap)
    clock = _filled(nlinks, zero)
    mark = _filled(nlinks, zero)
    # A connection streams one send at a time, its ``q_idx[head[c]]``: that send's
    # bottleneck link (-1 before it streams) and virtual finish time ``target`` are kept
    # per connection, with the sequence number ``ranked`` given when it was last set.
    bottleneck = _filled(nconn, -1)
    target = _filled(nconn, zero)
    ranked = _filled(nconn, 0)
    # Per link a binary heap of the connections it bottlenecks, by (target, ranked):
    # ``members[base[lid]:base[lid] + size_of[lid]]`` (room for every connection crossing
    # the link), ``place[c]`` the index of connection c in its bottleneck's heap.
    base = _filled(nlinks + 1, 0)
    for k in range(len(cl_idx)):
        base[cl_idx[k] + 1] += 1
    for lid in range(nlinks):
        base[lid + 1] += base[lid]
    members = _filled(len(cl_idx), 0)
    size_of = _filled(nlinks, 0)
    place = _filled(nconn, 0)
    # Per route (``route[c]``, connections of one route cross the same links in the same
    # order) its distinct links ``rp_link[rp_ptr[r]:rp_ptr[r+1]]`` in route order, each a
    # pair p of route and link: ``bottlenecked[p]`` counts the route's connections
    # bottlenecked at the link, ``pair_of[c]`` is the pair of connection c's bottleneck;
    # per link its pairs ``thru_pair[thru_ptr[lid]:thru_ptr[lid+1]]`` (with their routes,
    # ``thru_route``). ``began[c]`` numbers connection c's send in the order the sends
    # started.
    nroutes = 0
    for c in range(nconn):
        if route[c] >= nroutes:
            nroutes = route[c] + 1
    some = _filled(nroutes, -1)         # a connection of each route
    for c in range(nconn):
        if some[route[c]] < 0:
            some[route[c]] = c
    rp_ptr = _filled(nroutes + 1, 0)
    rp_link = _filled(len(cl_idx), 0)
    thru_ptr = _filled(nlinks + 1, 0)
    for r in range(nroutes):
        c = some[r]
        rp_ptr[r + 1] = rp_ptr[r]
        for k in range(cl_ptr[c], cl_ptr[c + 1]):
            first = True
            for e in range(cl_ptr[c], k):
                if cl_idx[e] == cl_idx[k]:
                    first = False
            if first:
                rp_link[rp_ptr[r + 1]] = cl_idx[k]
                rp_ptr[r + 1] += 1
                thru_ptr[cl_idx[k] + 1] += 1
    for lid in range(nlinks):
        thru_ptr[lid + 1] += thru_ptr[lid]
    thru_pair = _filled(rp_ptr[nroutes], 0)
    thru_route = _filled(rp_ptr[nroutes], 0)
    filled = _copied(thru_ptr[:nlinks])
    for r in range(nroutes):
        for pair in range(rp_ptr[r], rp_ptr[r + 1]):
            lid = rp_link[pair]
            thru_pair[filled[lid]] = pair
            thru_route[filled[lid]] = r
            filled[lid] += 1
    bottlenecked = _filled(rp_ptr[nroutes], 0)
    pair_of = _filled(nconn, 0)
    old_share = _copied(cap)
    touched_as = _filled(nlinks, 0)     # a touched link's index in this batch's list
    began = _filled(nconn, 0)
    head = _copied(q_ptr[:nconn])
    busy = _filled(nconn, False)
    unsent = _copied(unsent)
    # The links' next finishes: a binary heap by (time, sequence number) with one entry
    # per link whose heap of connections is not empty, ``fin_at[lid]`` its index (-1:
    # none), updated in place when the link's next finish changes.
    fin_when = _filled(nlinks, zero)
    fin_seq = _filled(nlinks, 0)
    fin_link = _filled(nlinks, 0)
    fin_at = _filled(nlinks, -1)
    nfin = 0

    def sift(at: int, count: int, i: int) -> None:
        # Moves entry i of the heap ``members[at:at + count]`` up or down to its place (a
        # closure: compiled, it is inlined, its arrays not passed, so not counted).
        c = members[at + i]
        while i > 0:
            up = (i - 1) // 2
            p = members[at + up]
            if not (target[c] < target[p] or
                    (target[c] == target[p] and ranked[c] < ranked[p])):
                break
            members[at + i] = p
            place[p] = i
            i = up
        while 2 * i + 1 < count:
            child = 2 * i + 1
            d = members[at + child]
            if child + 1 < count:
                e = members[at + child + 1]
                child += (target[e] < target[d]) | ((target[e] == target[d]) &
                                                    (ranked[e] < ranked[d]))
                d = members[at + child]
            if not (target[d] < target[c] or
                    (target[d] == target[c] and ranked[d] < ranked[c])):
                break
            members[at + i] = d
            place[d] = i
            i = child
        members[at + i] = c
        place[c] = i

    def settle(i: int, count: int, at: Any, rank: int, lid: int) -> None:
        # Puts link lid's next finish (time ``at``, sequence number ``rank``) in slot i of
        # the heap of ``count`` finishes and moves it up or down to its place. The heap is
        # 4-ary (children 4i+1 to 4i+4): half the levels of a binary one; the first finish
        # is the same whatever the shape (no two have the same sequence number).
        while i > 0:
            up = (i - 1) // 4
            if fin_when[up] < at or (fin_when[up] == at and fin_seq[up] < rank):
                break
            fin_when[i] = fin_when[up]
            fin_seq[i] = fin_seq[up]
            fin_link[i] = fin_link[up]
            fin_at[fin_link[i]] = i
            i = up
        while 4 * i + 1 < count:
            child = 4 * i + 1
            for k in range(child + 1, min(child + 4, count)):
                child += (k - child) * ((fin_when[k] < fin_when[child]) | (
                    (fin_when[k] == fin_when[child]) & (fin_seq[k] < fin_seq[child])))
            if at < fin_when[child] or (at == fin_when[child] and rank < fin_seq[child]):
                break
            fin_when[i] = fin_when[child]
            fin_seq[i] = fin_seq[child]
            fin_link[i] = fin_link[child]
            fin_at[fin_link[i]] = i
            i = child
        fin_when[i] = at
        fin_seq[i] = rank
        fin_link[i] = lid
        fin_at[lid] = i

    def farthest() -> Any:
        # The longest time a link needs for the bytes of the sends not started over it.
        far = zero
        for lid in range(nlinks):
            if unsent[lid] / cap[lid] > far:
                far = unsent[lid] / cap[lid]
        return far

    def first_smallest(r: int) -> int:
        # The first link of route r with the smallest share.
        best = rp_link[rp_ptr[r]]
        for pair in range(rp_ptr[r] + 1, rp_ptr[r + 1]):
            if share[rp_link[pair]] < share[best]:
                best = rp_link[pair]
        return best

    def enter(c: int, lid: int, goal: Any, rank: int) -> None:
        # Connection c, bottlenecked at link lid from now, enters that link's heap with
        # virtual finish time ``goal`` and sequence number ``rank``.
        pair = rp_ptr[route[c]]
        while rp_link[pair] != lid:
            pair += 1
        bottlenecked[pair] += 1
        pair_of[c] = pair
        bottleneck[c] = lid
        target[c] = goal
        ranked[c] = rank
        members[base[lid] + size_of[lid]] = c
        size_of[lid] += 1
        sift(base[lid], size_of[lid], size_of[lid] - 1)

    # The deliveries due later outside the queues below (and superseded finishes counted
    # as events, ``what`` -1): a binary heap by (time, sequence number) in arrays that
    # grow as needed (a batch adds at most ``room``).
    room = nconn + nlinks
    when = _filled(2 * room, zero)
    order = _filled(2 * room, 0)
    what = _filled(2 * room, 0)
    nheap = 0
    seq = 0
    # With a deadline, the links' superseded finishes (time, sequence number) not yet
    # counted as events, while no check can stop the run (``exact_checks`` false; see the
    # docstring): ``verified`` the last time cleared, ``reach`` the longest time last
    # computed.
    ghost_when = _filled(2 * nlinks, zero)
    ghost_seq = _filled(2 * nlinks, 0)
    nghost = 0
    verified = zero
    reach = farthest() if deadline > zero else zero
    exact_checks = deadline > zero and reach > deadline
    START, LINK, ARRIVE = 0, 1, 2
    touched_at = _filled(nlinks, -1)
    moved_at = _filled(nconn, -1)
    touched = _filled(nlinks, 0)          # per batch, with their counts
    started = _filled(nconn, 0)
    done = _filled(nconn, 0)
    moved = _filled(nconn, 0)
    moved_by = _filled(nconn, 0)
    movers = _filled(nconn, 0)
    mover_by = _filled(nconn, 0)
    starts = 0
    arrived = _filled(n, 0)
    # Events due at the current time that the batch just handled pushed: the next batch
    # (the heap then holds nothing due before it), kept in push order, as the heap's
    # sequence numbers would order them, without a heap.
    soon = 2 * nconn + nlinks
    soon_kind = _filled(soon, 0)
    soon_x = _filled(soon, 0)
    nsoon = 0
    # Deliveries of connections with the same latency, in the order their sends finished
    # (so in time order): entries appended in that order (the send, its time and sequence
    # number), per queue its first and last entry, per entry the next one.
    lane_first = _filled(lanes, -1)
    lane_last = _filled(lanes, -1)
    lane_next = _filled(n, -1)
    lane_send = _filled(n, 0)
    due = _filled(n, zero)
    due_seq = _filled(n, 0)
    appended = 0
    queued = 0
    for c in range(nconn):
        if q_ptr[c] < q_ptr[c + 1]:
            s = q_idx[q_ptr[c]]
            if sends[4 * s] == 0:
                busy[c] = True
                seq += 1
                soon_kind[nsoon] = START
                soon_x[nsoon] = c
                nsoon += 1
    delivered = 0
    end = zero
    batch = 0
    events = 0
    now = zero
    while nsoon > 0 or nfin > 0 or nheap > 0 or queued > 0 or nghost > 0:
        if exact_checks:
            while nheap + nghost + room > len(when):
                when = _grown(when)
                order = _grown(order)
                what = _grown(what)
            for i in range(nghost):
                if ghost_when[i] > verified:
                    _pushed(when, order, what, nheap, ghost_when[i], ghost_seq[i], -1)
                    nheap += 1
                else:
                    events += 1
            nghost = 0
        elif nghost + nlinks > len(ghost_when):
            kept = 0
            for i in range(nghost):
                if ghost_when[i] > verified:
                    ghost_when[kept] = ghost_when[i]
                    ghost_seq[kept] = ghost_seq[i]
                    kept += 1
            events += nghost - kept
            nghost = kept
            if 2 * (nghost + nlinks) > len(ghost_when):
                ghost_when = _grown(ghost_when)
                ghost_seq = _grown(ghost_seq)
        if nheap + room > len(when):
            when = _grown(when)
            order = _grown(order)
            what = _grown(what)
        # (the arrays change only out here: compiled, the batches do not count
        # references to them)
        while (nsoon > 0 or nfin > 0 or nheap > 0 or queued > 0 or nghost > 0) and \
                nheap + room <= len(when) and nghost + nlinks <= len(ghost_when):
            pending_soon = nsoon
            nsoon = 0
            if pending_soon == 0:
                found = nfin > 0
                if found:
                    now = fin_when[0]
                if nheap > 0 and (not found or when[0] < now):
                    now = when[0]
                    found = True
                for k in range(lanes):
                    h = lane_first[k]
                    if h >= 0 and (not found or due[h] < now):
                        now = due[h]
                        found = True
                if deadline > zero and not exact_checks:
                    if found and now + reach > deadline:
                        reach = farthest()
                    if not found or now + reach > deadline:
                        exact_checks = True
                        break
                    verified = now
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
                    taken += 1
                else:
                    # the earliest event due now (by sequence number): the first link
                    # finish, delivery in the heap or delivery in a queue
                    source = -3
                    first_seq = -1
                    if nfin > 0 and fin_when[0] == now:
                        first_seq = fin_seq[0]
                        source = -2
                    if nheap > 0 and when[0] == now and (first_seq < 0 or order[0] < first_seq):
                        first_seq = order[0]
                        source = -1
                    for k in range(lanes):
                        h = lane_first[k]
                        if h >= 0 and due[h] == now and (first_seq < 0 or due_seq[h] < first_seq):
                            first_seq = due_seq[h]
                            source = k
                    if source == -3:
                        break
                    if source == -2:
                        kind = LINK
                        x = fin_link[0]
                        nfin -= 1
                        fin_at[x] = -1
                        if nfin > 0:
                            settle(0, nfin, fin_when[nfin], fin_seq[nfin], fin_link[nfin])
                    elif source == -1:
                        kind = ARRIVE
                        x = what[0]
                        nheap -= 1
                        _popped(when, order, what, nheap)
                    else:
                        from_lane = source
                        h = lane_first[from_lane]
                        x = lane_send[h]
                        lane_first[from_lane] = lane_next[h]
                        if lane_next[h] < 0:
                            lane_last[from_lane] = -1
                        queued -= 1
                        kind = ARRIVE
                events += 1
                if events % CHECK_EVERY == 0:
                    if check is not None:
                        check()
                    if exact_checks:
                        longest = zero
                        for lid in range(nlinks):
                            if unsent[lid] > longest * cap[lid]:
                                longest = unsent[lid] / cap[lid]
                        if now + longest > deadline:
                            return now, -1
                if kind == ARRIVE:
                    if x >= 0:
                        arrived[narrived] = x
                        narrived += 1
                elif kind == START:
                    c = x
                    amount = size[q_idx[head[c]]]
                    if amount <= 0:
                        done[ndone] = c
                        ndone += 1
                        continue
                    starts += 1
                    began[c] = starts
                    for k in range(cl_ptr[c], cl_ptr[c + 1]):
                        lid = cl_idx[k]
                        unsent[lid] -= amount
                        link_weight[lid] += weight[c]
                        if touched_at[lid] != batch:
                            touched_at[lid] = batch
                            touched[ntouched] = lid
                            ntouched += 1
                    started[nstarted] = c
                    nstarted += 1
                else:
                    if size_of[x] == 0:
                        continue
                    c = members[base[x]]
                    size_of[x] -= 1
                    if 0 < size_of[x]:
                        members[base[x] + 0] = members[base[x] + size_of[x]]
                        sift(base[x], size_of[x], 0)
                    bottleneck[c] = -1
                    bottlenecked[pair_of[c]] -= 1
                    for k in range(cl_ptr[c], cl_ptr[c + 1]):
                        lid = cl_idx[k]
                        link_weight[lid] -= weight[c]
                        if touched_at[lid] != batch:
                            touched_at[lid] = batch
                            touched[ntouched] = lid
                            ntouched += 1
                    if touched_at[x] != batch:
                        touched_at[x] = batch
                        touched[ntouched] = x
                        ntouched += 1
                    done[ndone] = c
                    ndone += 1
            for i in range(ntouched):
                lid = touched[i]
                clock[lid] += share[lid] * (now - mark[lid])
                mark[lid] = now
                old_share[lid] = share[lid]
                w = link_weight[lid]
                share[lid] = cap[lid] / w if w else cap[lid]
                touched_as[lid] = i
            # The connections that move: those a link whose share changed found (as the
            # walk over the links in their order, each seeing the shares of the links
            # before it and itself changed, would find them: where the share fell, those
            # crossing it bottlenecked at a link whose share was then larger; where it rose,
            # those it bottlenecks) whose route now has a smaller share than their
            # bottleneck's. They depend on the route and bottleneck only, so the pairs of
            # route and link are looked at, not the connections.
            nmoved = 0
            for i in range(ntouched):
                lid = touched[i]
                now_share = share[lid]
                if now_share < old_share[lid]:
                    for e in range(thru_ptr[lid], thru_ptr[lid + 1]):
                        r = thru_route[e]
                        best = -1
                        for pair in range(rp_ptr[r], rp_ptr[r + 1]):
                            b = rp_link[pair]
                            if b == lid or bottlenecked[pair] == 0:
                                continue
                            then = share[b]
                            if touched_at[b] == batch and touched_as[b] > i:
                                then = old_share[b]
                            if then > now_share:
                                if best < 0:
                                    best = first_smallest(r)
                                if share[best] < share[b]:
                                    for j in range(base[b], base[b] + size_of[b]):
                                        c = members[j]
                                        if route[c] == r and moved_at[c] != batch:
                                            moved_at[c] = batch
                                            moved[nmoved] = c
                                            moved_by[nmoved] = i
                                            nmoved += 1
                elif now_share > old_share[lid]:
                    for e in range(thru_ptr[lid], thru_ptr[lid + 1]):
                        if bottlenecked[thru_pair[e]] > 0:
                            r = thru_route[e]
                            if share[first_smallest(r)] < now_share:
                                for j in range(base[lid], base[lid] + size_of[lid]):
                                    c = members[j]
                                    if route[c] == r and moved_at[c] != batch:
                                        moved_at[c] = batch
                                        moved[nmoved] = c
                                        moved_by[nmoved] = i
                                        nmoved += 1
            nmovers = 0
            for i in range(nmoved):
                c = moved[i]
                j = nmovers
                while j > 0 and mover_by[j - 1] == moved_by[i] and \
                        began[movers[j - 1]] > began[c]:
                    movers[j] = movers[j - 1]
                    mover_by[j] = mover_by[j - 1]
                    j -= 1
                movers[j] = c
                mover_by[j] = moved_by[i]
                nmovers += 1
            for i in range(nmovers):
                c = movers[i]
                best = first_smallest(route[c])
                old_b = bottleneck[c]
                v = clock[old_b] + share[old_b] * (now - mark[old_b])
                left = (target[c] - v) * weight[c]
                if not left > 0:
                    left = zero
                if touched_at[old_b] != batch:
                    touched_at[old_b] = batch
                    touched[ntouched] = old_b
                    ntouched += 1
                size_of[old_b] -= 1
                bottlenecked[pair_of[c]] -= 1
                if place[c] < size_of[old_b]:
                    members[base[old_b] + place[c]] = members[base[old_b] + size_of[old_b]]
                    sift(base[old_b], size_of[old_b], place[c])
                v = clock[best] + share[best] * (now - mark[best])
                seq += 1
                enter(c, best, v + left / weight[c], seq)
                if touched_at[best] != batch:
                    touched_at[best] = batch
                    touched[ntouched] = best
                    ntouched += 1
            for i in range(nstarted):
                c = started[i]
                best = first_smallest(route[c])
                v = clock[best] + share[best] * (now - mark[best])
                seq += 1
                enter(c, best, v + size[q_idx[head[c]]] / weight[c], seq)
                if touched_at[best] != batch:
                    touched_at[best] = batch
                    touched[ntouched] = best
                    ntouched += 1
            for i in range(ntouched):
                lid = touched[i]
                f = fin_at[lid]
                if f >= 0 and exact_checks:
                    _pushed(when, order, what, nheap, fin_when[f], fin_seq[f], -1)
                    nheap += 1
                elif f >= 0 and deadline > zero:
                    ghost_when[nghost] = fin_when[f]
                    ghost_seq[nghost] = fin_seq[f]
                    nghost += 1
                if size_of[lid] > 0:
                    at = mark[lid] + (target[members[base[lid]]] - clock[lid]) / share[lid]
                    seq += 1
                    if at > now:
                        if f < 0:
                            f = nfin
                            nfin += 1
                        settle(f, nfin, at, seq, lid)
                        continue
                    soon_kind[nsoon] = LINK
                    soon_x[nsoon] = lid
                    nsoon += 1
                if f >= 0:
                    fin_at[lid] = -1
                    nfin -= 1
                    if f < nfin:
                        settle(f, nfin, fin_when[nfin], fin_seq[nfin], fin_link[nfin])
            for i in range(ndone):
                c = done[i]
                s = q_idx[head[c]]
                busy[c] = False
                head[c] += 1
                if head[c] < q_ptr[c + 1]:
                    if sends[4 * q_idx[head[c]]] == 0:
                        busy[c] = True
                        seq += 1
                        soon_kind[nsoon] = START
                        soon_x[nsoon] = c
                        nsoon += 1
                seq += 1
                if now + alpha[c] > now and lane[c] >= 0:
                    k = lane[c]
                    lane_send[appended] = s
                    due[appended] = now + alpha[c]
                    due_seq[appended] = seq
                    if lane_last[k] >= 0:
                        lane_next[lane_last[k]] = appended
                    else:
                        lane_first[k] = appended
                    lane_last[k] = appended
                    appended += 1
                    queued += 1
                elif now + alpha[c] > now:
                    _pushed(when, order, what, nheap, now + alpha[c], seq, s)
                    nheap += 1
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
                for k in range(sends[4 * s + 2], sends[4 * s + 6]):
                    u = dep_idx[k]
                    t = 4 * u
                    sends[t] -= 1
                    if sends[t] == 0:
                        c = sends[t + 1]
                        if q_idx[head[c]] == u and not busy[c]:
                            busy[c] = True
                            seq += 1
                            soon_kind[nsoon] = START
                            soon_x[nsoon] = c
                            nsoon += 1
    return end, delivered


@dataclass
class FlatProgram:
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
