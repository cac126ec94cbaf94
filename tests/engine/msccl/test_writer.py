"""MSCCL export: every schedule exports to XML that Canopy's simulator runs correctly."""

import functools
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from lxml import etree

from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.safe_xml import parse_xml_bytes
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.schedule import OptimumSummary, Schedule, Tree, TreeEdge
from canopy.engine.msccl import (
    MscclLimitError,
    MscclLimits,
    MscclOptions,
    explain_limits,
    largest_fitting_k,
    msccl_xml,
    schedule_threadblocks,
)
from canopy.engine.msccl.executor import simulate_bytes
from canopy.engine.msccl.threadblocks import parser_elements
from canopy.engine.network.indexed import Network
from tests.strategies import topologies

# One worker runs the module: what its caches compute is kept per process.
pytestmark = pytest.mark.xdist_group("msccl-writer")

SAMPLES = [name.removesuffix(".json") for name in sample_names()]
STEP_ATTRS = ["s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps",
              "hasdep"]


def check_export(schedule, inplace, data=None):
    if data is None:
        data = msccl_xml(schedule, options=MscclOptions(inplace=inplace))
    report = simulate_bytes(data)
    assert report.modes == ["in place" if inplace else "out of place"]
    assert report.ngpus == len(schedule.compute_nodes)
    return data


@functools.cache
def _solved(name, collective, k):
    return solve(load_sample(name), collective, k=k)


@functools.cache
def _exported(name, collective, k, inplace):
    """The XML of a sample's schedule, written once per test process (the slot-pair test
    reads the k = 1 exports the export-and-simulate test wrote)."""
    return msccl_xml(_solved(name, collective, k), options=MscclOptions(inplace=inplace))


@pytest.fixture(scope="module", autouse=True)
def _forget_exports_after_the_module():
    yield
    _exported.cache_clear()
    _solved.cache_clear()


@pytest.fixture(scope="module")
def solved():
    return _solved


# Samples of 32 GPUs and more (several seconds an export and run): out of place, the
# suite runs their optimal k only; in place, every k. Every sample and collective is still
# written and simulated in both buffer modes.
LARGE = {name for name in SAMPLES if len(load_sample(name).compute_nodes()) >= 32}


def sample_cases():
    """(sample, k, inplace): the optimal k, and fixed k = 1 and 2 unless that is the
    optimum, in place and out of place (out of place, the LARGE samples' optimal k only)."""
    cases = []
    for name in SAMPLES:
        optimal_k = find_optimum(Network.from_topology(load_sample(name))).k
        ks = [(None, "optimal")] + [(k, f"k{k}") for k in (1, 2) if k != optimal_k]
        for k, label in ks:
            for inplace, mode in ((True, "inplace"), (False, "outofplace")):
                if inplace or k is None or name not in LARGE:
                    cases.append(pytest.param(name, k, inplace, id=f"{name}-{label}-{mode}"))
    return cases


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("name, k, inplace", sample_cases())
def test_samples_export_and_simulate(name, collective, k, inplace):
    schedule = _solved(name, collective, k)
    data = check_export(schedule, inplace, _exported(name, collective, k, inplace))
    algo = etree.fromstring(data)
    n = len(schedule.compute_nodes)
    assert algo.get("nchunksperloop") == str(n * schedule.k)
    assert algo.get("ngpus") == str(n)
    assert algo.get("inplace") == str(int(inplace))
    assert algo.get("outofplace") == str(int(not inplace))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies())
def test_random_topologies_export_and_simulate(topo):
    for collective in COLLECTIVES:
        for k in (None, 1, 2):
            try:
                schedule = solve(topo, collective, k=k)
            except ScheduleError as exc:  # the solver's documented fixed-k refusal
                assert k is not None
                assert "rounding every link down to whole trees unbalances" in str(exc), exc
                continue
            for inplace in (True, False):
                check_export(schedule, inplace)


@pytest.mark.parametrize("fuse, channels", [(False, 1), (True, 1), (True, 2), (True, 32)])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_fusing_and_channel_spread_options(solved, collective, fuse, channels):
    schedule = solved("dgx-a100-2x8", collective, None)
    options = MscclOptions(fuse=fuse, channels=channels, layout="compact")
    assignment = schedule_threadblocks(schedule, options=options)
    kinds = {step.kind for tbs in assignment.tbs for tb in tbs for step in tb.steps}
    assert kinds.isdisjoint({"rcs", "rrs", "rrcs"}) != fuse
    assert assignment.nchannels <= channels
    simulate_bytes(msccl_xml(schedule, options=options))
    simulate_bytes(msccl_xml(star_schedule(collective), options=options))


def test_more_channels_means_more_thread_blocks_and_fewer_splits(solved):
    schedule = solved("mi250-2x16", "allreduce", None)
    assignments = [schedule_threadblocks(schedule,
                                         options=MscclOptions(channels=c, layout="compact"))
                   for c in (1, 8)]
    tbs = [max(len(r) for r in a.tbs) for a in assignments]
    steps = [sum(len(tb.steps) for r in a.tbs for tb in r) for a in assignments]
    assert tbs[0] < tbs[1] and steps[0] > steps[1]


def test_xml_is_well_formed_and_has_the_runtime_shape(solved):
    data = msccl_xml(solved("dgx-a100-2x8", "allreduce", None))
    assert data.startswith(b"<algo ")           # the runtime's parser takes no declaration
    assert b"\t" not in data                      # nor tabs between elements
    algo = parse_xml_bytes(data, "export")
    assert list(algo.attrib) == ["name", "proto", "nchannels", "nchunksperloop", "ngpus",
                                 "coll", "inplace", "outofplace", "minBytes", "maxBytes"]
    gpus = algo.findall("gpu")
    assert [g.get("id") for g in gpus] == [str(i) for i in range(16)]
    for gpu in gpus:
        assert list(gpu.attrib) == ["id", "i_chunks", "o_chunks", "s_chunks"]
        tbs = gpu.findall("tb")
        assert [tb.get("id") for tb in tbs] == [str(i) for i in range(len(tbs))]
        for tb in tbs:
            # and Canopy's via (the route of the send connection), which the runtime ignores
            assert list(tb.attrib) in (["id", "send", "recv", "chan"],
                                       ["id", "send", "recv", "chan", "via"])
            steps = tb.findall("step")
            assert [s.get("s") for s in steps] == [str(i) for i in range(len(steps))]
            for step in steps:
                assert list(step.attrib) == STEP_ATTRS


def test_every_dependency_target_has_hasdep(solved):
    algo = etree.fromstring(msccl_xml(solved("dgx-a100-2x8", "allreduce", None)))
    for gpu in algo.findall("gpu"):
        tbs = gpu.findall("tb")
        for tb in tbs:
            for step in tb.findall("step"):
                depid = int(step.get("depid"))
                if depid >= 0:
                    assert depid != int(tb.get("id"))
                    target = tbs[depid].findall("step")[int(step.get("deps"))]
                    assert target.get("hasdep") == "1"


def test_threadblock_assignment_respects_the_runtime_limits(solved):
    limits = MscclLimits()
    assignment = schedule_threadblocks(solved("mi250-2x16", "allreduce", None))
    assert assignment.nchannels <= limits.max_channels
    for rank_tbs in assignment.tbs:
        per_channel = {}
        connections = set()
        for tb in rank_tbs:
            assert len(tb.steps) <= limits.max_steps_per_tb
            assert all(step.cnt <= limits.max_count for step in tb.steps)
            per_channel[tb.channel] = per_channel.get(tb.channel, 0) + 1
            for peer, way in ((tb.send, "send"), (tb.recv, "recv")):
                if peer >= 0:
                    assert (peer, way, tb.channel) not in connections
                    connections.add((peer, way, tb.channel))
            for step in tb.steps:
                assert step.send_peer in (-1, tb.send) and step.recv_peer in (-1, tb.recv)
        assert max(per_channel.values()) <= limits.max_tbs_per_channel
        assert len(rank_tbs) <= limits.max_tbs_per_gpu


def test_layouts_stay_within_the_gpus_sms():
    """A layout that would need more thread blocks than the GPU has SMs gives way to one
    that shares thread blocks (and a limit no layout meets is refused)."""
    schedule = star_schedule("allgather", k=3)
    wide = max(len(r) for r in schedule_threadblocks(schedule).tbs)
    options = MscclOptions(limits=MscclLimits(max_tbs_per_gpu=wide - 1))
    assert max(len(r) for r in schedule_threadblocks(schedule, options=options).tbs) < wide
    with pytest.raises(MscclLimitError, match="thread blocks, more than the GPU's 1 SMs"):
        schedule_threadblocks(schedule,
                              options=MscclOptions(limits=MscclLimits(max_tbs_per_gpu=1)))


def test_multiplicity_beyond_cnt_limit_is_split(solved):
    schedule = solved("mi250-2x16", "allgather", None)
    assert max(t.multiplicity for t in schedule.trees) > MscclLimits().max_count
    cnts = {int(s.get("cnt")) for s in etree.fromstring(msccl_xml(schedule)).iter("step")}
    assert max(cnts) == MscclLimits().max_count
    small = solved("dgx-a100-2x8", "allreduce", None)
    data = msccl_xml(small, options=MscclOptions(limits=MscclLimits(max_count=4)))
    assert max(int(s.get("cnt")) for s in etree.fromstring(data).iter("step")) == 4
    simulate_bytes(data)


def test_reduce_scatter_uses_scratch_only_out_of_the_input(solved):
    """Partial sums of reduce-scatter never land in another rank's part of the input."""
    schedule = solved("dgx-a100-2x8", "reduce-scatter", None)
    algo = etree.fromstring(msccl_xml(schedule))
    k = schedule.k
    for gpu in algo.findall("gpu"):
        r = int(gpu.get("id"))
        for step in gpu.iter("step"):
            if step.get("type") in ("rrc", "rrcs", "r", "rcs", "cpy", "re") and \
                    step.get("dstbuf") == "i":
                assert r * k <= int(step.get("dstoff")) < (r + 1) * k


# ---------------------------------------------------------------- limits and k


def elements_per_gpu(assignment):
    return max(parser_elements(len(assignment.tbs), len(tbs), sum(len(tb.steps) for tb in tbs))
               for tbs in assignment.tbs)


def test_tight_limits_name_the_largest_k_that_fits():
    topo = load_sample("dgx-a100-2x8")
    schedule = solve(topo, "allgather")
    need = elements_per_gpu(schedule_threadblocks(schedule,
                                                  options=MscclOptions(layout="compact")))
    options = MscclOptions(limits=MscclLimits(max_elements_per_gpu=need - 1), layout="compact")
    with pytest.raises(MscclLimitError, match="does not fit the runtime's limits: rank "
                       rf"\d+ needs {need} XML elements, more than the {need - 1}") as info:
        msccl_xml(schedule, options=options)
    best = largest_fitting_k(topo, "allgather", schedule.k, options)
    assert best is not None and best < schedule.k
    simulate_bytes(msccl_xml(solve(topo, "allgather", k=best), options=options))
    for k in range(best + 1, schedule.k):
        with pytest.raises(MscclLimitError):
            schedule_threadblocks(solve(topo, "allgather", k=k), options=options)
    error = explain_limits(info.value, topo, schedule, options=options)
    assert str(error).endswith(f" at k = {schedule.k}; the largest fixed k that fits is {best} "
                               f"(canopy solve --k {best}).")
    assert str(error).count(".") == 1


def test_limits_no_k_can_meet():
    topo = load_sample("forestcoll-fig2")
    schedule = solve(topo, "allgather", k=2)
    options = MscclOptions(limits=MscclLimits(max_channels=1, max_tbs_per_channel=1))
    with pytest.raises(MscclLimitError) as info:
        msccl_xml(schedule, options=options)
    assert "no fixed k fits either" in str(explain_limits(info.value, topo, schedule,
                                                          options=options))


# ---------------------------------------------------------------- hand-made schedules


def star_schedule(collective="allgather", k=3, n=5, reduce_differently=False):
    """n GPUs; root r sends to r+1 and r+2, which relays to the rest; and a chain."""
    names = [f"g{i}" for i in range(n)]

    def trees(split):
        out = []
        for r in range(n):
            nxt = [names[(r + j) % n] for j in range(1, n)]
            root = names[r]
            edges = [TreeEdge(root, nxt[0], (root, nxt[0])), TreeEdge(root, nxt[1],
                                                                      (root, nxt[1]))]
            edges += [TreeEdge(nxt[1], v, (nxt[1], v)) for v in nxt[2:]]
            chain = [TreeEdge(a, b, (a, b)) for a, b in zip([root, *nxt], nxt, strict=False)]
            out.append(Tree(root, 0, split, tuple(edges)))
            out.append(Tree(root, 1, k - split, tuple(chain)))
        return out
    summary = OptimumSummary(Fraction(1), (), Fraction(1), k, Fraction(1))
    return Schedule(collective, names, k, Fraction(1), trees(1), summary,
                    reduce_trees=trees(2) if reduce_differently else None)


@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_hand_made_schedules(collective, inplace):
    check_export(star_schedule(collective), inplace)


@pytest.mark.parametrize("inplace", [True, False])
def test_allreduce_with_different_reduce_trees_refines_chunks(inplace):
    schedule = star_schedule("allreduce", k=3, reduce_differently=True)
    data = check_export(schedule, inplace)
    cnts = {int(s.get("cnt")) for s in etree.fromstring(data).iter("step")
            if s.get("type") != "cpy"}      # out of place, inputs are copied in longer runs
    assert cnts == {1}          # cuts at 1 (broadcast) and 2 (reduce) refine 3 chunks to 1s


def test_export_rejects_schedules_that_are_not_forests():
    schedule = star_schedule()
    tree = schedule.trees[0]
    schedule.trees[0] = Tree(tree.root, 0, 1, tree.edges[:-1])
    with pytest.raises(ScheduleError, match="reaches 4 of the 5 compute nodes"):
        msccl_xml(schedule)
    schedule = star_schedule()
    schedule.trees[1] = Tree("g0", 1, 1, schedule.trees[1].edges)
    with pytest.raises(ScheduleError, match="root 'g0' has 2 unit trees, but k = 3"):
        msccl_xml(schedule)


def test_unknown_protocol_or_runtime_is_refused():
    with pytest.raises(ScheduleError, match="unknown MSCCL protocol 'Fast'"):
        msccl_xml(star_schedule(), options=MscclOptions(protocol="Fast"))
    with pytest.raises(ScheduleError, match="unknown MSCCL runtime 'nccl'"):
        msccl_xml(star_schedule(), options=MscclOptions(runtime="nccl"))


@pytest.mark.parametrize("runtime, name", [("msccl", "reduce_scatter"),
                                           ("rccl", "reducescatter")])
def test_reduce_scatter_is_named_for_the_runtime(runtime, name):
    data = msccl_xml(star_schedule("reduce-scatter"), options=MscclOptions(runtime=runtime))
    assert etree.fromstring(data).get("coll") == name
    assert simulate_bytes(data).coll == "reduce_scatter"
    data = msccl_xml(star_schedule("allreduce"), options=MscclOptions(runtime=runtime))
    assert etree.fromstring(data).get("coll") == "allreduce"


def test_options_change_the_header():
    data = msccl_xml(star_schedule(), options=MscclOptions(protocol="LL", name="mine",
                                                           min_bytes=1, max_bytes=4096))
    algo = etree.fromstring(data)
    assert (algo.get("proto"), algo.get("name"), algo.get("minBytes"),
            algo.get("maxBytes")) == ("LL", "mine", "1", "4096")
    simulate_bytes(data)


def test_export_as_another_collective():
    schedule = star_schedule("allgather")
    data = msccl_xml(schedule, "allreduce")
    assert etree.fromstring(data).get("coll") == "allreduce"
    assert simulate_bytes(data).coll == "allreduce"


# ---------------------------------------------------------------- the msccl-tools convention

SLOT = ("srcbuf", "srcoff", "dstbuf", "dstoff", "cnt")
SENDS = {"s", "rcs", "rrs", "rrcs"}
RECEIVES = {"r", "rcs", "rrs", "rrc", "rrcs"}


def transfers(algo):
    """{(sender, receiver, channel): ([sending steps], [receiving steps])}, in order."""
    out = {}
    for gpu in algo.iter("gpu"):
        rank = int(gpu.get("id"))
        for tb in gpu.iter("tb"):
            chan = int(tb.get("chan"))
            for step in tb.iter("step"):
                if step.get("type") in SENDS:
                    out.setdefault((rank, int(tb.get("send")), chan), ([], []))[0].append(step)
                if step.get("type") in RECEIVES:
                    out.setdefault((int(tb.get("recv")), rank, chan), ([], []))[1].append(step)
    return out


def slot_pair_cases():
    """(sample, inplace): both buffer modes, the LARGE samples in place only (their k = 1
    exports the export-and-simulate test writes; the buffer mode's naming is the same at
    every size, and the smaller samples check it out of place)."""
    return [pytest.param(name, inplace, id=f"{name}-{'inplace' if inplace else 'outofplace'}")
            for name in SAMPLES for inplace in (True, False)
            if inplace or name not in LARGE]


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("name, inplace", slot_pair_cases())
def test_every_transfer_names_one_slot_pair_at_both_ends(name, collective, inplace):
    """msccl-tools writes a transfer's (src, dst) slots on the sending and the receiving
    step alike, and rcs steps with src = dst; MSCCL XML verifiers check both."""
    data = _exported(name, collective, 1, inplace)
    algo = etree.fromstring(data)
    for conn, (sent, received) in transfers(algo).items():
        assert len(sent) == len(received), conn
        for out, into in zip(sent, received, strict=True):
            assert [out.get(a) for a in SLOT] == [into.get(a) for a in SLOT], conn
    for step in algo.iter("step"):
        if step.get("type") == "rcs":
            assert (step.get("srcbuf"), step.get("srcoff")) == \
                (step.get("dstbuf"), step.get("dstoff"))


# ---------------------------------------------------------------- layouts


@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_pipelined_layout_gives_each_connection_one_unit_tree(collective, inplace):
    """Every thread block with a peer runs one step per loop iteration, moving one chunk:
    each unit tree edge streams on a connection of its own, as the execution model has it."""
    data = check_export(star_schedule(collective), inplace)     # layout "auto" fits here
    for gpu in etree.fromstring(data).iter("gpu"):
        for tb in gpu.iter("tb"):
            steps = tb.findall("step")
            if tb.get("send") == "-1" and tb.get("recv") == "-1":
                assert {s.get("type") for s in steps} == {"cpy"}
                continue
            assert len(steps) == 1 and steps[0].get("cnt") == "1"


def test_auto_layout_writes_the_connections_compare_simulates():
    """Here unit connections need 10 channels per pair; with 6 to 9 the trees are cut
    into parts of at most 2 chunks, a connection per edge; with fewer, tree edges share
    connections. The XML has exactly the connections of :func:`runtime_layout`'s plan
    (the one ``canopy compare`` times) and still computes the allgather."""
    from canopy.engine.model.plan import schedule_plan
    from canopy.engine.msccl.connections import describe_layout, runtime_layout

    schedule = star_schedule("allgather", k=3)
    plan = schedule_plan(schedule)
    own, shared = "a connection per tree edge", "connections shared by tree edges"
    expected = {10: (60, "unit connections"), 9: (40, f"{own} (trees of at most 2 chunks)"),
                6: (40, f"{own} (trees of at most 2 chunks)"),
                5: (35, f"{shared} (trees of at most 2 chunks)"),
                2: (20, f"{shared} (trees of at most 2 chunks)")}
    for limit, (count, name) in expected.items():
        limits = MscclLimits(max_channels=limit)
        described = describe_layout(plan, runtime_layout(plan, limits))
        assert (described["connections"], described["layout"]) == (count, name)
        data = msccl_xml(schedule, options=MscclOptions(limits=limits))
        simulate_bytes(data)
        root = etree.fromstring(data)
        assert len({(gpu.get("id"), tb.get("send"), tb.get("chan")) for gpu in root.iter("gpu")
                    for tb in gpu.iter("tb") if tb.get("send") != "-1"}) == count
        assert int(root.get("nchannels")) <= limit
    assert msccl_xml(schedule) == msccl_xml(schedule, options=MscclOptions(layout="pipelined"))
    with pytest.raises(ScheduleError, match="unknown MSCCL layout 'wide'"):
        msccl_xml(schedule, options=MscclOptions(layout="wide"))


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_any_plan_lowers_to_xml_that_computes_the_collective(collective):
    """The lowering reads the one schedule model (:class:`CollectivePlan`), so a ring
    plan exports as well as a forest: one chunk per root and ring here."""
    from canopy.engine.baselines.ring import ring_baseline
    from canopy.engine.msccl import plan_xml
    from canopy.engine.msccl.lowering import chunks_per_root

    topo = load_sample("forestcoll-fig2.json")
    plan = ring_baseline(topo, collective).plan_at(Fraction(1 << 20))
    rings = len({t.key[0] for t in plan.trees})
    assert chunks_per_root(plan) == rings
    report = simulate_bytes(plan_xml(plan))
    assert report.summary().startswith(collective.replace("-", "_"))
    assert report.summary().endswith("the result is correct")


def test_thread_blocks_kept_between_checking_and_writing_write_the_same_xml():
    """:func:`plan_algo` (the runtime choice's MSCCL++ check) keeps a plan's thread blocks
    for :func:`plan_xml` (the export): the XML written after the check is the XML of a
    fresh assignment; the protocol, runtime and name still change only the text and are
    still checked; out of place, or another chunk count, is not served the in-place
    program."""
    from canopy.engine.model.plan import schedule_plan
    from canopy.engine.msccl import writer

    plan = schedule_plan(star_schedule("allreduce", k=2))
    writer._KEPT.clear()
    fresh = {inplace: writer.threadblocks_xml(writer.plan_threadblocks(
        plan, 2, MscclOptions(inplace=inplace))) for inplace in (True, False)}
    writer.plan_algo(plan, 2, MscclOptions(), routes=False)
    assert writer.plan_xml(plan, 2, MscclOptions()) == fresh[True]
    assert writer.plan_xml(plan, 2, MscclOptions(inplace=False)) == fresh[False]
    assert writer.plan_xml(plan, 4, MscclOptions()) != fresh[True]
    renamed = writer.plan_xml(plan, 2, MscclOptions(runtime="rccl", name="mine"))
    assert etree.fromstring(renamed).get("name") == "mine"
    with pytest.raises(ScheduleError, match="unknown MSCCL protocol 'Fast'"):
        writer.plan_xml(plan, 2, MscclOptions(protocol="Fast"))
