"""The timing walk's question "does one of these sends wait for that one?", compiled by numba.

The same two searches as :meth:`canopy.engine.mscclpp.timing._Builder.reaches` (back from
the later sends, forward from the early one, a step of each in turn, until they meet or
either has nothing left, within the same bounds of send order, chain length and loop
iteration), on the walk's flat arrays, for every early send a list leaves
open in one call: the sets of the searches are stamps in one array (a send is in the
backward set where its mark is the query's even stamp, in the forward set where it is the
odd one; a send in both would be where they met), and both stacks share one array, the
backward one from its start and the forward one from its end (a send is pushed once, on one
side). The answers are the reference's (tests/engine/mscclpp/test_timing.py walks plans both
ways): the question asked thousands of times per iteration of a large allreduce is, in
Python, most of the walk (docs/runtimes.md).

Used when numba is installed (``pip install -e '.[fast]'``, as the simulator's event loop;
compiled once, cached on disk); otherwise the walk asks in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from canopy.engine.execution.jit import cached_jit

_COMPILED: list[Any] = []


def compiled_reached() -> Callable[..., int] | None:
    """:func:`_reached` compiled by numba (cached on disk), or None without numba. Loads as
    the simulator's compiled loop does (:func:`canopy.engine.execution.kernel.compiled_event_loop`,
    which keeps numba's BLAS probe from importing scipy.linalg)."""
    if not _COMPILED:
        from canopy.engine.execution.kernel import compiled_event_loop

        if compiled_event_loop() is None:
            _COMPILED.append(None)
        else:
            _COMPILED.append(cached_jit(_reached))
    return _COMPILED[0]


def _reached(keep: Any, ts: Any, out: Any, after: Any, ptr: Any, depth: Any, late: Any,
             named: Any, next_named: Any, mark: Any, stack: Any, stamp: int) -> int:
    """For each ``ts[i]``, ``out[i]`` = 1 where one of the sends ``keep`` waits for it
    through its chain of waits, else 0; the walk's lists are ``after`` (CSR by ``ptr``,
    each in ascending order) and, read the other way, ``named`` and ``next_named``; per
    send ``depth`` and ``late`` bound the searches as in the reference.
    ``mark`` holds no stamp from ``stamp`` on; returns the next free stamp."""
    top = len(stack)
    for i in range(len(ts)):
        t = ts[i]
        out[i] = 0
        low = depth[t]
        early = late[t]
        latest = -1                             # the latest iteration of keep's chains
        back, ahead = stamp, stamp + 1
        stamp += 2
        nb = 0
        high = -1
        last = -1
        for b in keep:
            if b > t and depth[b] > low and late[b] >= early:
                mark[b] = back
                stack[nb] = b
                nb += 1
                high = max(high, depth[b])
                latest = max(latest, late[b])
                last = max(last, b)
        if nb == 0:
            continue
        mark[t] = ahead
        nf = 1
        stack[top - 1] = t
        bound = ptr[last + 1]
        found = False
        while nb > 0 and nf > 0 and not found:
            nb -= 1
            s = stack[nb]
            lo, hi = ptr[s], ptr[s + 1]
            a_lo, a_hi = lo, hi                 # the first entry of s's list past t
            while a_lo < a_hi:
                mid = (a_lo + a_hi) >> 1
                if after[mid] <= t:
                    a_lo = mid + 1
                else:
                    a_hi = mid
            if a_lo > lo and after[a_lo - 1] == t:
                found = True
                break
            for j in range(a_lo, hi):
                a = after[j]
                if mark[a] == ahead:
                    found = True
                    break
                if depth[a] > low and late[a] >= early and mark[a] != back:
                    mark[a] = back
                    stack[nb] = a
                    nb += 1
            if found:
                break
            nf -= 1
            s = stack[top - 1 - nf]
            e = named[s]
            while e >= bound:
                e = next_named[e]
            while e >= 0:
                w_lo, w_hi = t, last + 1        # the send whose list holds entry e
                while w_lo < w_hi:
                    mid = (w_lo + w_hi) >> 1
                    if e < ptr[mid]:
                        w_hi = mid
                    else:
                        w_lo = mid + 1
                w = w_lo - 1
                e = next_named[e]
                if mark[w] == back:
                    found = True
                    break
                if w < last and depth[w] < high and late[w] <= latest and mark[w] != ahead:
                    mark[w] = ahead
                    stack[top - 1 - nf] = w
                    nf += 1
        if found:
            out[i] = 1
    return stamp
