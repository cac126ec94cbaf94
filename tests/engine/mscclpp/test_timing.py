"""The timing walk's lists of sends a message waits for stay antichains: no send in a list
waits (through the sends it waits for) for another of the same list, and no two share a
connection, so on a relaying all-to-all they do not grow toward every connection."""

import json
from fractions import Fraction

import pytest

from canopy.engine.alltoall import solve_alltoall
from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
from canopy.engine.deploy.mscclpp_export import schedule_algo
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.mscclpp.files import rank_servers
from canopy.engine.mscclpp.reach_kernel import compiled_reached
from canopy.engine.mscclpp.reader import parse_plan
from canopy.engine.mscclpp.timing import _Builder
from canopy.engine.mscclpp.writer import algo_plan


def test_a_message_waits_for_an_antichain_of_sends():
    """A 4x4 torus all-to-all relays on every link, so each thread block hears, through
    the signals it waits for, of sends on connections far away; every one of those is
    also waited for by a send of the list, so the lists hold at most 3 sends (up to 9
    when a list kept the latest send of every connection it had heard from)."""
    topo = generate("torus", {"dims": "4x4"})
    file = alltoall_plan("/nonexistent/a2a.json", topo, solve_alltoall(topo).schedule,
                         tune=False)
    builder = _Builder(parse_plan(json.loads(file.data)), topo, Fraction(1 << 30), 4)
    builder.build()
    ptr = builder.after_ptr
    afters = [builder.after[ptr[s]:ptr[s + 1]] for s in range(len(builder.conn))]
    ancestors: list[int] = []                # bit set of the sends each one waits for
    for after in afters:
        bits = 0
        for a in after:
            bits |= ancestors[a] | (1 << a)
        ancestors.append(bits)
    for after in afters:
        assert len({builder.conn[a] for a in after}) == len(after)
        assert not any(ancestors[b] >> a & 1 for a in after for b in after)
    assert max(len(after) for after in afters) == 3


def walked(plan, topo, count, kernel):
    """The walk's arrays (each send's connection, size, depth and both lists), asking the
    search ``kernel`` (None: the Python search)."""
    builder = _Builder(plan, topo, Fraction(1 << 30), count)
    builder.kernel = kernel
    builder.build()
    ptr, wptr = builder.after_ptr, builder.wait_ptr
    return [list(builder.conn), list(builder.amount_of), list(builder.depth),
            [list(builder.after[ptr[s]:ptr[s + 1]]) for s in range(len(builder.conn))],
            [list(builder.waits[wptr[s]:wptr[s + 1]]) for s in range(len(builder.conn))]]


def test_the_compiled_search_walks_as_the_python_one():
    """The compiled search (where numba is installed) keeps the same sends in every list
    as the Python search, on an all-to-all that relays on every link and on an allreduce
    over trees (where some lists drop a send a later one waits for through others), also
    when its stamps start over, and every list is in ascending order (the searches pass
    over a list's entries up to the early send)."""
    kernel = compiled_reached()
    if kernel is None:
        pytest.skip("numba is not installed")
    answers: list[int] = []

    def counted(*args):
        stamp = kernel(*args)
        answers.extend(args[2].tolist())
        # now and then the stamps come to the end of 32 bits: the walk starts them over
        return 2**31 - 4 if len(answers) % 7 == 0 else stamp
    torus = generate("torus", {"dims": "4x4"})
    alltoall = parse_plan(json.loads(alltoall_plan(
        "/nonexistent/a2a.json", torus, solve_alltoall(torus).schedule, tune=False).data))
    servers = rank_servers(torus)
    allreduce = parse_plan(algo_plan(schedule_algo(solve(torus, "allreduce"), True, servers),
                                     servers))
    for plan in (alltoall, allreduce):
        compiled = walked(plan, torus, 3, counted)
        assert compiled == walked(plan, torus, 3, None)
        assert all(after == sorted(after) and len(set(after)) == len(after)
                   for after in compiled[3])
    assert 0 < sum(answers) < len(answers)     # asked, answered both ways, as in Python


def test_the_searches_answer_as_the_chains_of_waits():
    """Whether one of some sends waits for another, through the lists, is answered as the
    lists' transitive closure says, by the Python search and the compiled one alike, also
    where the loop iterations bound the searches: on an allreduce over trees the leaves'
    thread blocks wait for nothing and send every iteration first, so sends of late
    iterations come early in the walk; a send's ``late`` is never below that of a send it
    waits for, also for a step outside the loop (iteration 0)."""
    torus = generate("torus", {"dims": "4x4"})
    servers = rank_servers(torus)
    plan = parse_plan(algo_plan(schedule_algo(solve(torus, "allreduce"), True, servers),
                                servers))
    builder = _Builder(plan, torus, Fraction(1 << 30), 4)
    builder.build()
    ptr, late = builder.after_ptr, builder.late
    ancestors: list[int] = []
    for s in range(len(builder.conn)):
        bits = 0
        for a in builder.after[ptr[s]:ptr[s + 1]]:
            assert late[a] <= late[s]
            bits |= ancestors[a] | (1 << a)
        ancestors.append(bits)
    n = len(ancestors)
    assert max(late[:n // 8]) == max(late) == 3     # the walk runs ahead of iterations
    asked = bounded = 0
    for b in range(1, n, 7):
        c = (b * 5) % n            # a second start, earlier or later
        sends = sorted({b, c})
        ts = list(range(max(0, b - 300), b, 3))
        truth = [any(ancestors[s] >> t & 1 for s in sends) for t in ts]
        assert [builder.reaches(sends, t) for t in ts] == truth
        if builder.kernel is not None:
            yes = [t for t, y in zip(ts, truth, strict=True) if y]
            assert builder.reached(sends, ts) == yes
        asked += len(ts)
        bounded += sum(y and min(late[s] for s in sends) < late[t]
                       for t, y in zip(ts, truth, strict=True))
    assert asked > 10_000 and bounded > 100
    # a step outside the loop waiting for the last iteration's send
    s = builder.message([builder.conn[n - 1]], 0, [n - 1], 0)
    assert late[s] == 3 and builder.reaches([s], n - 1)
