"""The MSCCL++ fit check counts the plan's operations and channels instead of writing the
plan: it must say exactly what writing the plan says. The reference here writes the whole
plan for every cut, round by round, as the writer once did; the count must match it on
every round (each part's ops, each step's ops, the channels it counts) and the verdict
must be the same, on fitting and refused programs alike."""

import pytest

from canopy.engine.alltoall.mscclpp_plan import port_lanes
from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.deploy.runtime_choice import plan_fits
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclLimits, MscclOptions, msccl_xml, plan_xml
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.msccl.writer import plan_algo
from canopy.engine.mscclpp import writer as W
from canopy.engine.mscclpp.files import rank_servers

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-mscclpp-test_fit_count")


def written(algo, servers, max_tbs, lanes=None):
    """The verdict of writing the plan for each cut in turn (the cut lowered until every
    part fits), checking the count against each written plan: ("fits", cuts) or
    ("refused", the words the refusal must hold)."""
    program = W._Program(algo, servers, lanes)
    counter = W._Counter(W._Cut(program, {}))
    tbs = {(g.id, tb.id): tb for g in algo.gpus for tb in g.tbs}
    cuts, budget = {}, {}
    for _ in range(12):
        cut = W._Cut(program, dict(cuts))
        writer = W._Writer(program, dict(cuts), W.DEFAULT_UNIT)
        writer.build()
        sizes = writer.part_sizes()
        assert counter.count(cut) == (sizes, writer.step_ops)
        channels = {key: {kind: len(ids) for kind, ids in tb.channels.items()}
                    for key, tb in writer.tbs.items()}
        counted = counter.channels(cut)
        assert all(channels[key] == kinds for key, kinds in counted.items())
        assert all(n <= W.MAX_CHANNEL for key, kinds in channels.items()
                   if key not in counted for n in kinds.values())
        over = {(g, t) for (g, t, _), n in sizes.items() if n > W.MAX_OPERATION}
        if not over:
            for (g, t, _), kinds in channels.items():
                for kind, n in kinds.items():
                    if n > W.MAX_CHANNEL:
                        return "refused", f"GPU {g}'s thread block {t} needs {n} {kind} channels"
            used = [sum(1 for (h, _, _), n in sizes.items() if h == g and n)
                    for g in range(algo.ngpus)]
            for g, n in enumerate(used):
                if max_tbs is not None and n > max_tbs:
                    return "refused", f"GPU {g} needs {n} thread blocks"
            return "fits", cuts
        per = {}
        for (g, _, _), n in sizes.items():
            if n:
                per[g] = per.get(g, 0) + (1 if n <= W.MAX_OPERATION else 2)
        gpu, fewest = max(per.items(), key=lambda gn: (gn[1], -gn[0]))
        if max_tbs is not None and fewest > max_tbs:
            return "refused", f"GPU {gpu} needs at least {fewest} thread blocks"
        step_ops = writer.step_ops
        for g, t in sorted(over):
            budget[(g, t)] = budget.get((g, t), W.MAX_OPERATION - W.PART_OVERHEAD + 4) - 4
            cuts[(g, t)] = W._cut(tbs[(g, t)], W._hoisted(tbs[(g, t)]), budget[(g, t)],
                                  lambda st, g=g, t=t, ops=step_ops: ops.get((g, t, st.s), 1))
        if min(budget.values()) < 8:
            break
    g, t = min(over)
    worst = max(n for (h, u, _), n in sizes.items() if (h, u) == (g, t))
    return "refused", f"GPU {g}'s thread block {t} needs {worst} operations"


def same_verdict(algo, servers, max_tbs, lanes=None):
    """Whether the count's verdict is the written plan's (asserts it); the verdict."""
    want = written(algo, servers, max_tbs, lanes)
    try:
        W.check_fits(algo, servers, max_tbs, lanes)
    except W.MscclppLimitError as error:
        assert want[0] == "refused" and want[1] in str(error), (want, str(error))
        return want
    assert want[0] == "fits", want
    assert W._fitting_cut(W._Program(algo, servers, lanes), max_tbs).cuts == want[1]
    return want


@pytest.fixture(scope="module")
def compact():
    """hypercube-3d allreduce on the compact layout: thread blocks of up to 64 ops."""
    topo = load_sample("hypercube-3d")
    xml = msccl_xml(solve(topo, "allreduce"), options=MscclOptions(layout="compact"))
    return rank_servers(topo), read_msccl_bytes(xml)


@pytest.mark.parametrize("limit", [40, 24, 16, 12])
def test_cut_thread_blocks_count_as_written(monkeypatch, compact, limit):
    """Lower op limits cut more thread blocks into more parts, over more rounds, until
    the GPU's thread blocks (or the smallest budget) run out."""
    servers, algo = compact
    monkeypatch.setattr(W, "MAX_OPERATION", limit)
    verdicts = {max_tbs: same_verdict(algo, servers, max_tbs)[0]
                for max_tbs in (None, 16, 10, 8, 6)}
    assert "refused" in verdicts.values() or limit == 40
    if limit >= 24:
        assert verdicts[None] == "fits"


def test_channel_limits_count_as_written(monkeypatch, compact):
    servers, algo = compact
    monkeypatch.setattr(W, "MAX_OPERATION", 16)
    verdicts = set()
    for most in (1, 2, 3):
        monkeypatch.setattr(W, "MAX_CHANNEL", most)
        verdicts.add(same_verdict(algo, servers, None)[1])
    assert any("channels" in v for v in verdicts)


@pytest.mark.parametrize("most", [8, 3])
def test_lanes_count_as_written(monkeypatch, most):
    """Port connections in lanes (rule 10), up to ``most`` of them: a lane's share of a
    message depends on how the other end is cut, and 8 lanes each way exceed a thread
    block's channels once it is cut."""
    topo = load_sample("dgx-a100-2x8")
    servers = rank_servers(topo)
    algo = read_msccl_bytes(msccl_xml(solve(topo, "allgather", k=2),
                                      options=MscclOptions(layout="compact")))
    lanes = {conn: 1 + (3 * i) % most for i, conn in enumerate(sorted(port_lanes(algo, servers)))}
    verdicts = []
    for channels in (16, 6):
        monkeypatch.setattr(W, "MAX_CHANNEL", channels)
        for limit in (64, 16):
            monkeypatch.setattr(W, "MAX_OPERATION", limit)
            for max_tbs in (None, 5):
                verdicts.append(same_verdict(algo, servers, max_tbs, lanes))
    words = " ".join(v[1] for v in verdicts if v[0] == "refused")
    assert any(v[0] == "fits" and v[1] for v in verdicts)     # fits once cut
    assert "channels" in words and "at least" in words


@pytest.mark.parametrize("k", [2, 3])
def test_every_layout_of_a_small_sample_counts_as_written(k):
    """hypercube-3d allreduce's layouts on 8 thread blocks per GPU: at k = 3 none fits as
    an MSCCL++ plan, at k = 2 they do; plan_fits builds the program without its XML."""
    topo = load_sample("hypercube-3d")
    servers = rank_servers(topo)
    limits = MscclLimits(max_tbs_per_gpu=8)
    schedule = solve(topo, "allreduce", k=k)
    options = MscclOptions(inplace=True, limits=limits, layout="auto")
    for _, laid in iter_layouts(schedule_plan(schedule), limits, topo):
        algo = plan_algo(laid, k, options)
        assert algo == read_msccl_bytes(plan_xml(laid, k, options))
        verdicts = [same_verdict(algo, servers, max_tbs)[0] for max_tbs in (6, 8, 10)]
        assert verdicts[1] == ("fits" if k == 2 else "refused") and verdicts[2] == "fits"
        assert plan_fits(topo, k, laid, limits) == (k == 2)


@pytest.mark.parametrize("sample,collective,verdicts", [
    ("mi250-2x16", "allreduce", {108: "GPU 16 needs at least 110 thread blocks",
                                 110: "GPU 16 needs 111 thread blocks", 112: "fits"}),
    ("tpu-v4-4x4x4-torus", "reduce-scatter", {108: "GPU 0 needs at least 110 thread blocks"})])
def test_shared_by_step_layouts_that_need_more_thread_blocks(sample, collective, verdicts):
    """k = 2's "shared by step" layout needs more thread blocks than 108 once MSCCL++ cuts
    its thread blocks over 64 ops into parts: the runtime choice passes over it."""
    topo = load_sample(sample)
    servers = rank_servers(topo)
    limits = MscclLimits()
    schedule = best_schedule(topo, collective, k=2)
    laid = next(laid for name, laid in iter_layouts(schedule_plan(schedule), limits, topo)
                if name == "shared by step")
    algo = plan_algo(laid, 2, MscclOptions(inplace=True, limits=limits, layout="auto"))
    for max_tbs, verdict in verdicts.items():
        got = same_verdict(algo, servers, max_tbs)
        assert got[0] == verdict if verdict == "fits" else got[1] == verdict
