"""What the MSCCL connection layouts remember between calls changes no layout: the work
:func:`canopy.engine.msccl.connection_counts.channel_plan` does once per plan, the steps
:mod:`canopy.engine.msccl.pairing` works out once per plan laid out, kept by the plan's
identity, give the layouts a fresh process gives, whatever was asked before."""

from dataclasses import replace

from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclLimits, connection_counts, pairing
from canopy.engine.msccl.connection_counts import channel_plan, connection_members
from canopy.engine.msccl.connections import layouts
from canopy.engine.msccl.pairing import connection_steps, pair_threadblocks


def _forget() -> None:
    connection_counts._LAYINGS.clear()
    connection_counts._BUILT.clear()
    connection_counts._TIES.clear()
    connection_counts._PERMUTATIONS.clear()
    connection_counts._SPLITS.clear()
    connection_counts._MEMBERS.clear()
    pairing._EDGE_STEPS.clear()


def test_layouts_are_the_same_after_other_plans_and_from_scratch():
    """2 x DGX A100 allreduce within 1 % (k = 7): its nine layouts, paired ones among
    them, asked again after another collective's, and for an equal plan that is another
    object with every memo forgotten."""
    topology = load_sample("dgx-a100-2x8")
    plan = schedule_plan(solve(topology, "allreduce", tolerance=1))
    other = schedule_plan(solve(topology, "reduce-scatter", tolerance=1))
    limits = MscclLimits()
    first = layouts(plan, limits, topology)
    assert any(name.endswith("paired") for name, _ in first)
    assert len(first) >= 5
    layouts(other, limits, topology)
    assert layouts(plan, limits, topology) == first
    _forget()
    assert layouts(replace(plan), limits, topology) == first


def test_channel_plans_of_one_plan_do_not_leak_into_each_other():
    """Two counts for one plan, alternately: each time what the first call gave."""
    topology = load_sample("dgx-a100-2x8")
    plan = schedule_plan(solve(topology, "allgather", tolerance=1))
    keys = connection_members(plan, 2)
    many = {key: len(items) for key, items in keys.items()}
    one = dict.fromkeys(keys, 1)
    _forget()
    alone = channel_plan(plan, one, 2)
    _forget()
    assert channel_plan(plan, many, 2) != alone
    assert channel_plan(plan, one, 2) == alone
    assert channel_plan(plan, many, 2) == channel_plan(plan, many, 2)


def test_steps_of_a_layout_are_its_own_whatever_plan_it_came_from():
    """:func:`connection_steps` with the plan a layout was laid out from as ``base``
    equals it without, and pairing with or without it pairs alike."""
    topology = load_sample("dgx-a100-2x8")
    plan = schedule_plan(solve(topology, "allreduce", tolerance=1))
    keys = connection_members(plan, 1)
    laid = channel_plan(plan, {key: len(items) for key, items in keys.items()}, 1)
    assert connection_steps(laid, 71, plan) == connection_steps(laid, 71)
    tight = MscclLimits(max_tbs_per_gpu=90)      # 121 unpaired
    paired = pair_threadblocks(laid, tight, plan)
    assert paired is not None and len(paired.paired) > 100
    assert pair_threadblocks(laid, tight) == paired


def test_pairing_from_channels_alone_is_pairing_the_built_layout():
    """A paired layout's bisection pairs each budget's layout from its edges' channels
    (:func:`~canopy.engine.msccl.connection_counts.layout_channels`) without building it:
    at every budget from 61 to 90 thread blocks (60 per GPU; 2 x DGX A100 allreduce
    within 1 %, shared by step; some pair, some do not) the channels are the built
    layout's, and the pairing applied to it is :func:`pair_threadblocks` of it (both
    None, or the same plan)."""
    from canopy.engine.msccl.connection_counts import Descent, layout_channels, server_places
    from canopy.engine.msccl.pairing import edge_channels
    from canopy.engine.msccl.pairing import pairing as pair_channels

    topology = load_sample("dgx-a100-2x8")
    plan = schedule_plan(solve(topology, "allreduce", tolerance=1))
    servers = server_places(topology)
    limits = MscclLimits(max_tbs_per_gpu=60)
    descent = Descent(plan, limits.max_channels, 2, None, True)
    outcomes = set()
    for budget in range(61, 91):
        counts = descent.counts(replace(limits, max_tbs_per_gpu=budget))
        laid = channel_plan(plan, counts, 2, servers)
        channels = layout_channels(plan, counts, 2, servers)
        assert channels == edge_channels(laid)
        found = pair_channels(plan, channels, limits, servers)
        expected = pair_threadblocks(laid, limits, plan, servers)
        assert (found is None) == (expected is None), budget
        if found is not None:
            assert found.apply(laid) == expected, budget
        outcomes.add(expected is not None and bool(expected.paired))
    assert outcomes == {True, False}


def test_trial_placements_leave_no_trace():
    """:class:`canopy.engine.msccl.threadblocks._Channels`' trials (``reach``) take back
    every change, keys their checks created included, in the order the tables had them:
    after placing half the chains of 2 x DGX A100's allgather, trying the others on every
    channel leaves each table as it was."""
    from canopy.engine.msccl.lowering import chunks_per_root, plan_steps
    from canopy.engine.msccl.threadblocks import _Channels, order_chains

    topology = load_sample("dgx-a100-2x8")
    plan = schedule_plan(solve(topology, "allgather", k=1))
    steps = plan_steps(plan, chunks_per_root(plan), True, 71, piece=1, fuse_fanout=False)
    chains = order_chains(steps.chains)
    channels = _Channels(MscclLimits(max_tbs_per_channel=4), "own")
    half = len(chains) // 2
    for chain in chains[:half]:          # placed where a channel takes the whole chain
        channels.choose(list(chain.steps), True, 1)

    def tables() -> list:
        return [(key, [list(t.items()) for t in (c.pair_of_recv, c.pair_of_send,
                                                  c.recv_steps, c.send_steps, c.fused_steps)])
                for key, c in channels.state.items()]

    before = tables()
    assert any(rows[2] for _, rows in before)
    for chain in chains[half:]:
        for ch in range(4):
            channels.reach(list(chain.steps), ch, True)
    after = [entry for entry in tables() if any(entry[1])]
    assert after == [entry for entry in before if any(entry[1])]


def test_slack_choice_picks_as_if_every_link_time_were_summed_anew(monkeypatch):
    """The slack choice keeps per link its connections and fullest keys up to date as keys
    give up connections; at every pick of 2 x DGX A100's allreduce in unit trees (by phase
    and by 2 steps) it takes the key a pass over every link's keys with exact times
    takes: the slowest of its links fastest after it gives one up, then most connections,
    then the larger key (40 thread blocks per GPU, so that many give one up)."""
    from fractions import Fraction

    from canopy.engine.model.plan import path_links

    topology = load_sample("dgx-a100-2x8.json")
    plan = schedule_plan(solve(topology, "allreduce"))
    split = connection_counts.split_trees(plan, connection_counts.multiplicities(plan), 1)
    caps = topology.capacities()
    mult = connection_counts.multiplicities(split)
    picked = []
    original, start = connection_counts._SlackChoice.pick, connection_counts._SlackChoice.__init__
    given = {}

    def noted(self, plan, members, counts, topology):
        given[id(self)] = {k: list(v) for k, v in members.items()}
        start(self, plan, members, counts, topology)

    def checked(self, choices):
        counts = self.counts
        members = given[id(self)]
        load = {k: sum(mult[ti] for _, ti, _ in v) for k, v in members.items()}
        route = {k: path_links(k[2] if k[2][0] == k[0] else tuple(reversed(k[2])))
                 for k in members}

        def link_time(link, less):
            on = [k for k in members for x in route[k] if x == link]
            total = sum(counts[k] - (k == less) for k in on)
            fullest = max(-(-load[k] // (counts[k] - (k == less))) for k in on)
            return Fraction(total * fullest) / caps[link]

        want = min(choices, key=lambda k: (max(link_time(x, k) for x in route[k]),
                                           -counts[k], k))
        got = original(self, choices)
        picked.append(got)
        assert got == want
        return got

    monkeypatch.setattr(connection_counts._SlackChoice, "pick", checked)
    monkeypatch.setattr(connection_counts._SlackChoice, "__init__", noted)
    for detail in (1, 3):
        connection_counts.Descent(split, 16, detail, topology, True).counts(
            MscclLimits(max_tbs_per_gpu=40))
    assert len(picked) > 100


def test_a_paired_layouts_bisection_pairs_each_distinct_counts_once(monkeypatch):
    """2 x DGX A100 allreduce: from some budget on every connection key has its largest
    count, so the bisection's later budgets give the same counts; they are paired once,
    and the layout is the one pairing every budget anew gives."""
    from canopy.engine.msccl import connections
    from canopy.engine.msccl.connection_counts import Descent, server_places

    topology = load_sample("dgx-a100-2x8")
    plan = schedule_plan(solve(topology, "allreduce"))
    limits = MscclLimits()
    servers = server_places(topology)
    descent = Descent(plan, limits.max_channels, 0, topology, True)
    seen, paired = [], []
    counts_of, pair = descent.counts, connections.pairing
    monkeypatch.setattr(descent, "counts", lambda wider: seen.append(
        frozenset(counts_of(wider).items())) or counts_of(wider))
    monkeypatch.setattr(connections, "pairing", lambda *a: paired.append(a) or pair(*a))
    laid = connections._paired_shared(plan, limits, 0, topology, True, servers, descent)
    assert laid is not None and laid.paired
    assert len(paired) == len(set(seen)) < len(seen)
    # each budget paired anew: the same layout
    monkeypatch.setattr(connections, "frozenset", lambda items: object(), raising=False)
    assert connections._paired_shared(plan, limits, 0, topology, True, servers) == laid
