"""TACOS's allgather synthesis (TACOS (Won et al., arXiv:2304.05301) §IV-D, Alg. 2 around Alg. 1)
compiled by numba.

The same matching as :func:`canopy.engine.baselines.tacos.synthesize`, the reference written
with Python sets, on flat arrays: per node a row of bit sets (WORD_BITS chunks a word) of
the chunks it holds and misses, links in CSR form, integer ticks and the random outputs
drawn in advance. A node's pool (the chunks it misses that a free link in holds, in
chunk order) is then a few word operations per free link rather than a test per chunk. Every
draw, tie and match is the reference's (tests/engine/baselines/test_tacos_synthesis.py runs
both against the plain loop), only much faster: ``canopy compare`` synthesizes a dozen
timetables of thousands of matches on a large cluster, which in Python would be much of its
time (docs/performance.md, "canopy compare").

Used when numba is installed (``pip install -e '.[fast]'``, as the simulator's event
loop; compiled once, cached on disk) and the times fit 64-bit integers; otherwise the
Python synthesis runs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from canopy.engine.execution.jit import cached_jit

STUCK = -1           # returned count: some node cannot be reached
SHORT = -2           # returned count: the random outputs drawn in advance ran out
WORD_BITS = 32       # chunks per word of a bit set (int64 words, their sign bits unused)
_COMPILED: list[Any] = []


def compiled_kernel() -> Callable[..., int] | None:
    """:func:`_match` compiled by numba (cached on disk; it calls :func:`_below` compiled
    too), or None without numba. Loads as the simulator's compiled loop does
    (:func:`canopy.engine.execution.kernel.compiled_event_loop`, which keeps numba's BLAS probe from
    importing scipy.linalg)."""
    if not _COMPILED:
        from canopy.engine.execution.kernel import compiled_event_loop

        if compiled_event_loop() is None:
            _COMPILED.append(None)
        else:
            import types

            import numba
            scope = dict(_match.__globals__, _below=numba.njit(_below))
            _COMPILED.append(cached_jit(types.FunctionType(_match.__code__, scope, "_match")))
    return _COMPILED[0]


def _below(words: Any, at: int, n: int) -> tuple[int, int]:
    """``randrange(n)`` as CPython draws it from the outputs ``words[at:]``: the top
    n.bit_length() bits of an output, again until they are below n; (pick, next at), or
    (-1, at) when the outputs run out."""
    bits = 0
    m = n
    while m > 0:
        bits += 1
        m >>= 1
    shift = 32 - bits
    while at < len(words):
        pick = int(words[at]) >> shift
        at += 1
        if pick < n:
            return pick, at
    return -1, at


def _match(nodes: int, per_node: int, src_of: Any, ticks: Any, into_ptr: Any,
           into_link: Any, out_ptr: Any, out_link: Any, out_node: Any, words: Any,
           chunk: Any, link: Any, start: Any, end: Any) -> int:
    """Alg. 2 around Alg. 1 on ``nodes`` nodes of ``per_node`` chunks each (chunk c is
    the (c % per_node)-th of node c // per_node); per link its source and its ticks per
    chunk; per node the links into it (``into_link[into_ptr[d]:into_ptr[d+1]]``, in link
    order) and out of it with the node each enters. The matches go to ``chunk``, ``link``,
    ``start``, ``end``; returns how many, or STUCK or SHORT."""
    total = nodes * per_node
    width = (total + WORD_BITS - 1) // WORD_BITS
    held = np.zeros((nodes, width), dtype=np.int64)      # bit c % WORD_BITS of word
    missing = np.zeros((nodes, width), dtype=np.int64)   # c // WORD_BITS: chunk c
    lacking = np.full(nodes, total - per_node, dtype=np.int64)
    for d in range(nodes):
        for c in range(total):
            if c // per_node == d:
                held[d, c // WORD_BITS] |= 1 << (c % WORD_BITS)
            else:
                missing[d, c // WORD_BITS] |= 1 << (c % WORD_BITS)
    free_at = np.zeros(len(ticks), dtype=np.int64)
    touched = np.ones(nodes, dtype=np.bool_)
    free = np.empty(len(ticks), dtype=np.int64)
    pool = np.empty(total, dtype=np.int64)
    tied = np.empty(len(ticks), dtype=np.int64)
    arrivals = [(np.int64(0), np.int64(0), np.int64(0))]
    arrivals.pop()
    left = nodes * (total - per_node)
    in_flight = 0
    count = 0
    now = np.int64(0)
    at = 0
    while left > 0 or in_flight > 0:
        while len(arrivals) > 0 and arrivals[0][0] <= now:
            _, node, got = heapq.heappop(arrivals)
            word = got // WORD_BITS
            bit = np.int64(1) << (got % WORD_BITS)
            held[node, word] |= bit
            in_flight -= 1
            touched[node] = True
            for k in range(out_ptr[node], out_ptr[node + 1]):
                if free_at[out_link[k]] <= now and missing[out_node[k], word] & bit:
                    touched[out_node[k]] = True
        for d in range(nodes):
            if not touched[d]:
                continue
            touched[d] = False
            nfree = 0
            for k in range(into_ptr[d], into_ptr[d + 1]):
                if free_at[into_link[k]] <= now:
                    free[nfree] = into_link[k]
                    nfree += 1
            if nfree == 0 or lacking[d] == 0:
                continue
            size = 0
            for w in range(width):
                offer = np.int64(0)
                for j in range(nfree):
                    offer |= held[src_of[free[j]], w]
                offer &= missing[d, w]
                c = w * WORD_BITS
                while offer != 0:           # its chunks in order (bits below the sign)
                    if offer & 1:
                        pool[size] = c
                        size += 1
                    offer >>= 1
                    c += 1
            drawn = 0
            while drawn < size:
                pick, at = _below(words, at, size - drawn)
                if pick < 0:
                    return SHORT
                pick += drawn
                c = pool[pick]
                pool[pick] = pool[drawn]
                drawn += 1
                word = c // WORD_BITS
                bit = np.int64(1) << (c % WORD_BITS)
                if nfree == 1:
                    li = free[0]
                    if not held[src_of[li], word] & bit:
                        continue
                    one, at = _below(words, at, 1)       # choice of one still draws
                    if one < 0:
                        return SHORT
                    chosen = 0
                else:
                    ntied = 0
                    cheapest = np.int64(0)
                    for j in range(nfree):
                        x = free[j]
                        if held[src_of[x], word] & bit:
                            if ntied == 0 or ticks[x] < cheapest:
                                cheapest = ticks[x]
                                ntied = 0
                            if ticks[x] == cheapest:
                                tied[ntied] = j
                                ntied += 1
                    if ntied == 0:
                        continue
                    pick, at = _below(words, at, ntied)
                    if pick < 0:
                        return SHORT
                    chosen = tied[pick]
                li = free[chosen]
                for j in range(chosen, nfree - 1):       # free.remove(li), order kept
                    free[j] = free[j + 1]
                nfree -= 1
                free_at[li] = now + ticks[li]
                missing[d, word] &= ~bit
                lacking[d] -= 1
                left -= 1
                in_flight += 1
                heapq.heappush(arrivals, (free_at[li], np.int64(d), np.int64(c)))
                chunk[count] = c
                link[count] = li
                start[count] = now
                end[count] = free_at[li]
                count += 1
                if nfree == 0:
                    break
        if len(arrivals) == 0:
            if left > 0:
                return STUCK
            break
        now = arrivals[0][0]
    return count


def random_outputs(seed: int, count: int) -> np.ndarray:
    """The first ``count`` 32-bit outputs of ``random.Random(seed)``'s Mersenne Twister
    (``getrandbits(32·count)`` holds them, the first the least significant).

    Fewer outputs are the first of more, so the longest drawn for each of the last
    OUTPUTS_KEPT seeds (up to KEPT_WORDS of them) is kept and a shorter draw is its
    prefix: a comparison synthesizes a dozen timetables, over chunk counts and message
    sizes, from the same few seeds. The kernel only reads them."""
    import random

    kept = _OUTPUTS.get(seed)
    if kept is not None and count <= len(kept):
        return kept[:count]
    block = random.Random(seed).getrandbits(32 * count).to_bytes(4 * count, "little")
    words = np.frombuffer(block, dtype="<u4").astype(np.int64)
    if count <= KEPT_WORDS:
        _OUTPUTS.pop(seed, None)
        if len(_OUTPUTS) >= OUTPUTS_KEPT:
            _OUTPUTS.pop(next(iter(_OUTPUTS)))
        _OUTPUTS[seed] = words
    return words


OUTPUTS_KEPT = 8           # seeds whose random outputs are kept
KEPT_WORDS = 1 << 20       # the most outputs kept per seed (8 MiB)
_OUTPUTS: dict[int, np.ndarray] = {}
