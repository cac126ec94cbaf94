"""Programs whose links each carry one connection: the event loop as one pass in order.

Where no link is crossed by two connections, no two sends ever share a link (a
connection streams one send at a time), so processor sharing never changes a rate: a
send starts once its connection's previous send has finished and its dependencies are
delivered, streams at its route's smallest share, and is delivered its connection's α
later. TACOS's timetables on switch-unwound rings run so (one connection per logical
link, TACOS (Won et al., arXiv:2304.05301) §IV-B; a link carries one chunk at a time).

:func:`_exclusive_loop` computes every send's times in one pass over the sends, in an
order that respects the dependencies and each connection's order, with the same float
operations the event loop (:func:`canopy.engine.execution.kernel._event_loop`) performs
for such a program, so the times are the same floats. What the event loop does there:
each link keeps a virtual clock, advanced by its share times the time since it was last
touched, whenever a send over it starts or finishes (every link of a route is touched
at both; a link belongs to one connection, so only that connection's sends touch it, in
its order). An idle link's share is its capacity c, a busy one's c / w (w the
connection's weight). A send of n bytes starting at t over bottleneck b (the first link
of the route with the smallest share) gets the target V_b + n / w and finishes at
t + (target - V_b) / share_b; it is delivered at finish + α. A connection's bottleneck
and each link's busy share do not change, so they are worked out once (the same
divisions, so the same floats), and each connection's next send is counted on (piece,
slot), not divided out of how many it has sent.

One source runs compiled by numba or as Python, as the event loop does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from canopy.engine.execution.jit import cached_jit


def exclusive_links(conn_link: Any, nlinks: int) -> bool:
    """Whether no link appears on the routes of two connections (or twice on one):
    ``conn_link`` lists every connection's links (ids below ``nlinks``)."""
    ids = np.asarray(conn_link, dtype=np.int64)
    return len(ids) == 0 or int(np.bincount(ids, minlength=nlinks).max()) <= 1


def _exclusive_loop(cap: Any, cl_ptr: Any, cl_idx: Any, alpha: Any, weight: Any, conn: Any,
                    size: Any, pending: Any, dep_ptr: Any, dep_idx: Any, q_ptr: Any,
                    q_idx: Any, pieces: int, ordered: bool, arrivals: Any,
                    check: Callable[[], None] | None, check_every: int) -> tuple[Any, int]:
    """(time of the last delivery, sends delivered) of ``pieces`` iterations of a program
    whose links each carry one connection. Per link ``cap``; per connection its links
    ``cl_idx[cl_ptr[c]:cl_ptr[c+1]]``, ``alpha`` and ``weight``, as the event loop takes
    them (:func:`canopy.engine.execution.kernel._event_loop`). One iteration's sends
    (slots) j: ``conn``, ``size``, how many of the iteration's sends each waits for
    (``pending``) and those waiting for it (``dep_idx[dep_ptr[j]:dep_ptr[j+1]]``, of the
    same iteration); ``q_idx[q_ptr[c]:q_ptr[c+1]]`` are connection c's slots in order.
    A connection sends in the order (piece, slot) or, ``ordered``, (slot, piece), as
    :func:`canopy.engine.execution.compiler.expand_template` lays the iterations out
    (one iteration is a flat program). Send (piece p, slot j) is delivered at
    ``arrivals[p * width + j]``; ``check`` is called every ``check_every`` sends."""
    nlinks = len(cap)
    nconn = len(alpha)
    width = len(conn)
    zero = cap[0] - cap[0]
    clock = _filled(nlinks, zero)
    mark = _filled(nlinks, zero)
    ready = _filled(width * pieces, zero)   # per send: its latest dependency's delivery
    pend = _filled(width * pieces, 0)
    for p in range(pieces):
        for j in range(width):
            pend[p * width + j] = pending[j]
    free = _filled(nconn, zero)        # per connection: when its last send finished
    head = _filled(nconn, 0)           # per connection: how many of its sends have gone
    # per connection its next send: its piece, its slot's index in the connection's
    # slots, and the send (-1: none left); counted on, not divided out of ``head``
    piece = _filled(nconn, 0)
    slot = _filled(nconn, 0)
    next_send = _filled(nconn, -1)
    # per connection the first link of its route with the smallest share when busy
    # (cap / w: a link carries this connection only), and per link that share
    best = _filled(nconn, 0)
    busy = _filled(nlinks, zero)
    stack = _filled(nconn, 0)          # connections whose next send can start
    top = 0
    for c in range(nconn):
        w = weight[c]
        best[c] = cl_idx[cl_ptr[c]]
        for k in range(cl_ptr[c], cl_ptr[c + 1]):
            lid = cl_idx[k]
            if w > 0:
                busy[lid] = cap[lid] / w
                if cap[lid] / w < cap[best[c]] / w:
                    best[c] = lid
        if q_ptr[c] < q_ptr[c + 1]:
            next_send[c] = q_idx[q_ptr[c]]
            if pend[next_send[c]] == 0:
                stack[top] = c
                top += 1
    end = zero
    delivered = 0
    while top > 0:
        top -= 1
        c = stack[top]
        count = q_ptr[c + 1] - q_ptr[c]
        s = next_send[c]
        j = s - piece[c] * width
        now = free[c]
        if ready[s] > now:
            now = ready[s]
        finish = now
        amount = size[j]
        if amount > 0:
            for k in range(cl_ptr[c], cl_ptr[c + 1]):
                lid = cl_idx[k]
                clock[lid] += cap[lid] * (now - mark[lid])      # idle: its capacity
                mark[lid] = now
            b = best[c]
            v = clock[b] + busy[b] * (now - mark[b])
            target = v + amount / weight[c]
            finish = mark[b] + (target - clock[b]) / busy[b]
            for k in range(cl_ptr[c], cl_ptr[c + 1]):
                lid = cl_idx[k]
                clock[lid] += busy[lid] * (finish - mark[lid])
                mark[lid] = finish
        free[c] = finish
        at = finish + alpha[c]
        arrivals[s] = at
        delivered += 1
        if at > end:
            end = at
        if check is not None and delivered % check_every == 0:
            check()
        base = s - j
        for k in range(dep_ptr[j], dep_ptr[j + 1]):
            t = base + dep_idx[k]
            if at > ready[t]:
                ready[t] = at
            pend[t] -= 1
            if pend[t] == 0:
                d = conn[dep_idx[k]]
                if next_send[d] == t:
                    stack[top] = d
                    top += 1
        head[c] += 1
        if head[c] < count * pieces:
            if ordered:
                piece[c] += 1
                if piece[c] == pieces:
                    piece[c] = 0
                    slot[c] += 1
            else:
                slot[c] += 1
                if slot[c] == count:
                    slot[c] = 0
                    piece[c] += 1
            t = piece[c] * width + q_idx[q_ptr[c] + slot[c]]
            next_send[c] = t
            if pend[t] == 0:
                stack[top] = c
                top += 1
        else:
            next_send[c] = -1
    return end, delivered


def _filled(count: int, value: Any) -> Any:
    """``count`` copies of ``value``: a list as Python; compiled, an array."""
    return [value] * count


_COMPILED: list = []


def compiled_exclusive_loop() -> Callable[..., tuple[Any, int]] | None:
    """:func:`_exclusive_loop` compiled by numba (cached on disk), its state in arrays,
    or None without numba (:func:`canopy.engine.execution.kernel.compiled_event_loop`
    loads numba)."""
    if not _COMPILED:
        from canopy.engine.execution.kernel import compiled_event_loop
        if compiled_event_loop() is None:
            _COMPILED.append(None)
        else:
            import types

            import numba
            scope = dict(_exclusive_loop.__globals__,
                         _filled=numba.njit(lambda count, value: np.full(count, value)))
            loop = types.FunctionType(_exclusive_loop.__code__, scope, "_exclusive_loop")
            _COMPILED.append(cached_jit(loop))
    return _COMPILED[0]
