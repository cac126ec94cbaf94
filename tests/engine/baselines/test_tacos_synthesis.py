"""TACOS's synthesis against the plain loop it replaces, and the chunk-count pruning
against trying every count (engine/baselines/tacos.py)."""

import heapq
import math
import random
from fractions import Fraction

import pytest

from canopy.engine.baselines.tacos import (
    DEFAULT_LATENCY_US,
    Match,
    Timetable,
    _Tacos,
    receive_bound,
    synthesize,
    transpose,
    unwind,
)
from canopy.engine.baselines.tacos_kernel import compiled_kernel
from canopy.engine.execution.program import link_time
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.errors import ScheduleError

SAMPLES = ["dgx-a100-2x8.json", "mesh-2d-3x3.json", "tacos-dragonfly-4x5.json",
           "leaf-spine-jobs.json", "mi250-8plus8.json"]


def reference_synthesize(links, nodes, chunks_per_node, chunk_size, seed):
    """Alg. 2 around Alg. 1 as first written: every node visited at every time, the
    draws through random.Random's randrange and choice."""
    rng = random.Random(seed)
    costs = [link_time(chunk_size, x.bandwidth, x.latency) for x in links]
    unit = math.lcm(*(c.denominator for c in costs))
    ticks = [int(c * unit) for c in costs]
    index = {n: i for i, n in enumerate(nodes)}
    chunks = [(o, q) for o in nodes for q in range(chunks_per_node)]
    into = [[] for _ in nodes]
    for li, x in enumerate(links):
        into[index[x.dst]].append(li)
    src_of = [index[x.src] for x in links]
    held = [{ci for ci, (o, _) in enumerate(chunks) if o == node} for node in nodes]
    missing = [set(range(len(chunks))) - held[d] for d in range(len(nodes))]
    free_at = [0] * len(links)
    arrivals, matches = [], []
    now = 0
    left = sum(len(m) for m in missing)
    in_flight = 0
    while left or in_flight:
        while arrivals and arrivals[0][0] <= now:
            _, d, c = heapq.heappop(arrivals)
            held[d].add(c)
            in_flight -= 1
        for d in range(len(nodes)):
            free = [li for li in into[d] if free_at[li] <= now]
            if not free or not missing[d]:
                continue
            pool = sorted(set().union(*(held[src_of[li]] & missing[d] for li in free)))
            for drawn in range(len(pool)):
                pick = rng.randrange(drawn, len(pool))
                pool[drawn], pool[pick] = pool[pick], pool[drawn]
                c = pool[drawn]
                candidates = [li for li in free if c in held[src_of[li]]]
                if not candidates:
                    continue
                cheapest = min(ticks[li] for li in candidates)
                li = rng.choice([li for li in candidates if ticks[li] == cheapest])
                free.remove(li)
                free_at[li] = now + ticks[li]
                missing[d].discard(c)
                left -= 1
                in_flight += 1
                heapq.heappush(arrivals, (free_at[li], d, c))
                matches.append(Match(chunks[c], li, now, free_at[li]))
                if not free:
                    break
        if not arrivals:
            if left:
                raise ScheduleError("undeliverable")
            break
        now = arrivals[0][0]
    columns = ([index[o] * chunks_per_node + q for (o, q), *_ in matches],
               [m.link for m in matches], [m.start for m in matches], [m.end for m in matches])
    table = Timetable(tuple(links), tuple(nodes), chunks_per_node, chunk_size,
                      *map(tuple, columns), unit, seed)
    assert table.matches == tuple(matches)
    return table


@pytest.mark.parametrize("compiled_from", [0, 1 << 60], ids=["compiled", "python"])
@pytest.mark.parametrize("name", SAMPLES)
def test_synthesis_draws_the_reference_matches(name, compiled_from):
    assert compiled_kernel() is not None          # numba is in the test extra
    topo = load_sample(name)
    nodes = topo.compute_nodes()
    for unwinding in ("ring", "mesh"):
        links = unwind(topo, unwinding)
        for chunks, seed, reverse in ((1, 0, False), (2, 5, True), (3, 11, False)):
            logical = transpose(links) if reverse else links
            size = Fraction(1 << 20, len(nodes) * chunks)
            assert synthesize(logical, nodes, chunks, size, seed, compiled_from) == \
                reference_synthesize(logical, nodes, chunks, size, seed)


def test_compiled_synthesis_draws_more_random_outputs_when_short(monkeypatch):
    from canopy.engine.baselines import tacos

    topo = load_sample("tacos-dragonfly-4x5.json")
    nodes = topo.compute_nodes()
    links = unwind(topo)
    size = Fraction(1 << 20, len(nodes) * 2)
    monkeypatch.setattr(tacos, "DRAWS_PER_DELIVERY", 0)
    monkeypatch.setattr(tacos, "_WORDS", 5)
    assert synthesize(links, nodes, 2, size, 3, compiled_from=0) == \
        reference_synthesize(links, nodes, 2, size, 3)


@pytest.mark.parametrize("compiled_from", [0, 1 << 60], ids=["compiled", "python"])
def test_a_node_no_link_reaches_is_named(compiled_from):
    topo = load_sample("mesh-2d-3x3.json")
    nodes = topo.compute_nodes()
    links = [x for x in unwind(topo) if x.dst != nodes[4]]
    with pytest.raises(ScheduleError, match=f"cannot deliver every chunk to '{nodes[4]}'"):
        synthesize(links, nodes, 1, Fraction(1 << 10), 0, compiled_from)


@pytest.mark.parametrize("name", ["dgx-a100-2x8.json", "mesh-2d-3x3.json"])
@pytest.mark.parametrize("collective", ["allgather", "reduce-scatter", "allreduce"])
def test_pruned_chunk_choice_is_the_full_minimum(name, collective):
    topo = load_sample(name)
    tacos = _Tacos(topo, collective, (1, 2, 4), 1, "ring", DEFAULT_LATENCY_US)
    everything = _Tacos(topo, collective, (1, 2, 4), 1, "ring", DEFAULT_LATENCY_US)
    for size, latency in ((Fraction(1), False), (Fraction(1 << 20), True),
                          (Fraction(1 << 24), True), (Fraction(1 << 30), True)):
        chosen = tacos.best_chunks(size, latency)
        assert chosen == min((1, 2, 4), key=lambda c: (everything.total(size, c, latency), c))
        for c in (1, 2, 4):
            assert tacos.bound(size, c, latency) <= everything.total(size, c, latency)
    skipped = {key for key in everything.cache if key not in tacos.cache}
    assert skipped or name != "dgx-a100-2x8.json"    # small sizes skip large counts there


def test_receive_bound_is_zero_without_links_in():
    topo = load_sample("mesh-2d-3x3.json")
    nodes = topo.compute_nodes()
    links = [x for x in unwind(topo) if x.dst != nodes[0]]
    assert receive_bound(links, nodes, 1, Fraction(1)) == 0
    assert receive_bound(unwind(topo), nodes, 1, Fraction(1)) > 0


def test_random_outputs_are_the_twisters_whatever_was_drawn_before(monkeypatch):
    import numpy as np

    from canopy.engine.baselines import tacos_kernel

    monkeypatch.setattr(tacos_kernel, "_OUTPUTS", {})
    for seed, count in ((3, 100), (3, 40), (5, 10), (3, 1000), (3, 999), (5, 11)):
        got = tacos_kernel.random_outputs(seed, count)
        rng = random.Random(seed)
        assert got.tolist() == [rng.getrandbits(32) for _ in range(count)]
        assert got.dtype == np.int64 and got.flags.c_contiguous
