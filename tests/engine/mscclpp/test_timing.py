"""The timing walk's lists of sends a message waits for stay antichains: no send in a list
waits (through the sends it waits for) for another of the same list, and no two share a
connection, so on a relaying all-to-all they do not grow toward every connection."""

import json
from fractions import Fraction

from canopy.engine.alltoall import solve_alltoall
from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
from canopy.engine.generators import generate
from canopy.engine.mscclpp.reader import parse_plan
from canopy.engine.mscclpp.timing import _Builder


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
