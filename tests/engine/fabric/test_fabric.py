"""Shared fabrics: ECMP hashing, the contention model, vClos placement, failures, jobs IO."""

import json
import time
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from canopy.cli import main
from canopy.engine.execution.simulate import simulate
from canopy.engine.fabric.analysis import analyze, ecmp_plan
from canopy.engine.fabric.contention import fair_rates
from canopy.engine.fabric.ecmp import EcmpRouter, five_tuple_hash
from canopy.engine.fabric.vclos import Placer, leaf_spine
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import dumps_topology, load_sample, loads_topology
from canopy.engine.model.errors import TopologyError
from canopy.engine.model.plan import CollectivePlan, FlowTree, path_links
from canopy.engine.model.workloads import Job
from canopy.engine.network.indexed import Network

SAMPLE = "leaf-spine-jobs"


def leaf_spine_topology(servers=16, gpus=1, per_leaf=8, spines=8):
    return generate("cluster", {"servers": str(servers), "gpus": str(gpus),
                                "scale_out": "leaf-spine", "leaf": "tor",
                                "servers_per_leaf": str(per_leaf), "spines": str(spines)})


def test_ecmp_collisions_match_balls_into_bins():
    """n flows leaving one leaf hash onto S uplinks like n balls into S bins: the mean
    number of colliding pairs is C(n, 2)/S and of idle uplinks S(1 - 1/S)^n."""
    topo = leaf_spine_topology()
    router = EcmpRouter(topo)
    gpus = topo.compute_nodes()
    flows = [(gpus[i], gpus[8 + (i + 3) % 8], five_tuple_hash(i + 1, 9 + i, 50000 + i))
             for i in range(8)]
    seeds = 3000
    pairs, idle = [], []
    for seed in range(seeds):
        uplinks = [next(v for u, v in path_links(router.path(s, d, h, seed))
                        if u == "leaf0") for s, d, h in flows]
        counts = np.bincount([int(u.removeprefix("spine")) for u in uplinks], minlength=8)
        pairs.append(sum(comb(int(c), 2) for c in counts))
        idle.append(int((counts == 0).sum()))
    assert np.mean(pairs) == pytest.approx(comb(8, 2) / 8, rel=0.05)
    assert np.mean(idle) == pytest.approx(8 * (7 / 8) ** 8, rel=0.05)


def test_ecmp_is_deterministic_per_seed_and_spreads():
    topo = leaf_spine_topology()
    router = EcmpRouter(topo)
    a, b = topo.compute_nodes()[0], topo.compute_nodes()[9]
    paths = {router.path(a, b, 12345, seed) for seed in range(64)}
    assert router.path(a, b, 12345, 7) == router.path(a, b, 12345, 7)
    assert len(paths) == 8 and all(len(p) == 7 for p in paths)


def test_fair_rates_are_max_min_fair():
    # Two links of capacity 1: job 0 on both, job 1 on the first, job 2 twice on the second.
    usage = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 2.0]])
    rates = fair_rates(usage, np.array([1.0, 1.0]))
    assert rates == pytest.approx([1 / 3, 2 / 3, 1 / 3])


def test_motivating_result_ecmp_collisions_slow_jobs():
    """vClos (Han et al., arXiv:2308.05692) §3: on a small leaf-spine, hash collisions slow jobs
    down (mean above 1,
    a tail of several-fold), while routing without collisions gives slowdown 1."""
    topo = load_sample(SAMPLE)
    ecmp = analyze(topo, routing="ecmp", seeds=100)
    for job in ecmp.jobs:
        assert job.mean > 1.5 and job.p99 >= 3
    alone = analyze(topo, topo.jobs[:1], "source")
    assert alone.jobs[0].mean == 1
    single = analyze(topo, topo.jobs[:1], "ecmp", seeds=100)   # intra-job collisions
    assert single.jobs[0].mean > 1.2


def _together(topo, jobs, plans):
    """The execution model running several jobs' plans at once (sizes in the shares)."""
    trees: dict[bool, list[FlowTree]] = {True: [], False: []}
    for job, plan in zip(jobs, plans, strict=True):
        for t in plan.trees:
            trees[t.reduce].append(FlowTree((job.name, t.key), t.root, t.edges,
                                            t.share * job.size, t.reduce))
    merged = CollectivePlan("allreduce", tuple(n for j in jobs for n in j.nodes),
                            tuple(trees[True]), tuple(trees[False]))
    return float(simulate(topo, merged, 1, jobs[0].pieces).time_us)


def test_flow_model_matches_execution_model():
    """Two jobs whose source routes collide: the flow model's completion time agrees with
    the execution model running both plans at once."""
    topo = load_sample(SAMPLE)
    result = analyze(topo, topo.jobs[:2], "source")
    assert [j.mean for j in result.jobs] == [2.0, 2.0]
    predicted = max(j.time_us(j.mean) for j in result.jobs)
    together = _together(topo, result.jobs, [j.plan for j in result.jobs])
    assert together == pytest.approx(predicted, rel=0.03)


def test_flow_model_matches_execution_model_under_ecmp():
    """Each seed's uneven collisions: the latest job's completion time in the flow model
    agrees with the execution model running all four jobs on their hashed routes."""
    topo = load_sample(SAMPLE)
    result = analyze(topo, routing="ecmp", seeds=3)
    router = EcmpRouter(topo)
    for seed in range(3):
        plans = [ecmp_plan(router, j.name, j.plan, seed) for j in result.jobs]
        predicted = max(j.time_us(j.slowdowns[seed]) for j in result.jobs)
        assert _together(topo, result.jobs, plans) == pytest.approx(predicted, rel=0.03)


def test_vclos_accepts_with_slowdown_one_and_isolates():
    topo = load_sample(SAMPLE)
    jobs = [Job("big", tuple(topo.compute_nodes()[:16])), Job("one", ("n6.gpu0", "n6.gpu1")),
            Job("pod", tuple(topo.compute_nodes()[16:24]))]
    result = analyze(topo, jobs, "vclos")
    stages = [j.placement["stage"] for j in result.jobs]
    assert stages == [2, 0, 1]
    for job in result.jobs:
        assert job.refused is None and job.mean == 1
    big = result.jobs[0]
    assert len(big.placement["leaves"]) == 2 and len(big.placement["spines"]) == 8
    used = [{k for f in j.plan.trees for e in f.edges for k in path_links(e.path)}
            for j in result.jobs]
    assert not (used[1] & used[2])


def test_vclos_refuses_on_a_fragmented_fabric():
    topo = load_sample(SAMPLE)
    for k in range(4):     # leaf k loses spines k and k+4: no vClos of 2x8 or 4x4 is left
        for link in topo.links:
            if {link.source, link.target} in ({f"leaf{k}", f"spine{k}"},
                                              {f"leaf{k}", f"spine{k + 4}"}):
                link.failed = True
    placer = Placer(leaf_spine(topo))
    alloc = placer.place("big", 16)
    assert not alloc.accepted and "fragmented" in alloc.refused
    assert placer.place("pod", 8).accepted
    result = analyze(topo, [Job("big", tuple(topo.compute_nodes()[:16]))], "vclos")
    assert "fragmented" in result.jobs[0].refused and result.jobs[0].mean is None
    assert "only" in Placer(leaf_spine(topo)).place("huge", 40).refused


def test_vclos_needs_a_tor_leaf_spine():
    rail = load_sample("rail-leaf-spine-4x8")
    with pytest.raises(Exception, match="one leaf"):
        leaf_spine(rail)


def test_failed_link_changes_the_optimum_as_the_reduced_topology():
    topo = load_sample("dgx-a100-2x8")
    before = find_optimum(Network.from_topology(topo))
    ib = next(k for k in topo.links if "nic" in k.source and "nic" not in k.target)
    ib.failed = True
    failed = find_optimum(Network.from_topology(topo))
    reduced = find_optimum(Network.from_topology(topo.reduced()))
    assert failed.inverse_x == reduced.inverse_x != before.inverse_x
    assert failed.cut_names() == reduced.cut_names()
    again = loads_topology(dumps_topology(topo))
    assert [k.failed for k in again.links] == [k.failed for k in topo.links]


def test_failed_switch_is_avoided_by_ecmp_and_saved():
    topo = load_sample(SAMPLE)
    topo.node("spine3").failed = True
    again = loads_topology(dumps_topology(topo))
    assert again.node("spine3").failed and again.jobs[0].nodes == topo.jobs[0].nodes
    result = analyze(again, routing="ecmp", seeds=20)
    assert not any("spine3" in (k.source, k.target) for k in result.links)
    topo.node("n0.gpu0").failed = True
    with pytest.raises(TopologyError, match="only links and switches"):
        analyze(topo, routing="ecmp", seeds=1)


def test_cli_fabric_json(tmp_path, capsys):
    out = tmp_path / "fabric.json"
    assert main(["fabric", _sample_path(), "--routing", "ecmp", "--seeds", "5",
                 "--fail", "leaf0-spine1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["format"] == "canopy-fabric" and data["version"] == 1
    assert data["routing"] == "ecmp" and len(data["jobs"]) == 4
    job = data["jobs"][0]
    assert {"name", "nodes", "collective", "alone_us", "slowdown"} <= set(job)
    assert set(job["slowdown"]) == {"mean", "p99"}
    assert {"source", "target", "load_mean", "load_max"} <= set(data["links"][0])
    assert not any({k["source"], k["target"]} == {"leaf0", "spine1"} for k in data["links"])
    assert "routing: ecmp" in capsys.readouterr().out


def _sample_path():
    from importlib import resources
    return str(resources.files("canopy.samples").joinpath(SAMPLE + ".json"))


@pytest.mark.parametrize("jobs, routing, message", [
    ([{"name": "a", "nodes": ["n0.gpu0", "nope"]}], "ecmp", "names node 'nope'"),
    ([{"name": "a", "nodes": []}], "ecmp", "is empty"),
    ([{"name": "a", "nodes": ["n0.gpu0", "n0.gpu1"]},
      {"name": "b", "nodes": ["n0.gpu1", "n0.gpu2"]}], "vclos", "may not overlap"),
    ([{"name": "a", "nodes": ["n0.gpu0", "leaf0"]}], "ecmp", "is a switch"),
    ([{"name": "a", "nodes": ["n0.gpu0", "n0.gpu1"], "size": -3}], "ecmp", "size"),
])
def test_bad_jobs_files_exit_2(tmp_path, capsys, jobs, routing, message):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"format": "canopy-jobs", "version": 1, "jobs": jobs}))
    assert main(["fabric", _sample_path(), "--jobs", str(path), "--routing", routing]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and str(path) in err and "\n" not in err


def test_overlapping_jobs_allowed_without_isolation():
    topo = load_sample(SAMPLE)
    jobs = [Job("dp", tuple(topo.compute_nodes()[:8])),
            Job("tp", tuple(topo.compute_nodes()[4:12]), "allgather", "ring", 1 << 20)]
    result = analyze(topo, jobs, "source")
    assert all(j.mean >= 1 for j in result.jobs)


def test_bad_fail_argument(capsys):
    assert main(["fabric", _sample_path(), "--fail", "leaf0-nowhere"]) == 2
    assert "no switch or link" in capsys.readouterr().err


def test_fabric_sizes_are_exact_bytes():
    topo = load_sample(SAMPLE)
    assert all(isinstance(j.size, int) for j in topo.jobs)
    assert Fraction(topo.jobs[0].size) == 64 << 20


def test_graphml_keeps_jobs_and_failures(tmp_path):
    from canopy.engine.io.graphml import load_graphml, save_graphml
    topo = load_sample(SAMPLE)
    topo.links[-1].failed = True
    topo.node("spine2").failed = True
    save_graphml(topo, tmp_path / "t.graphml")
    back = load_graphml(tmp_path / "t.graphml")
    assert back.links[-1].failed and back.node("spine2").failed
    assert [j.nodes for j in back.jobs] == [j.nodes for j in topo.jobs]


def test_fail_says_what_failed_and_vclos_says_nothing_of_seeds(capsys):
    from canopy.cli import main
    assert main(["fabric", "samples/leaf-spine-jobs.json", "--routing", "vclos", "--fail",
                 "leaf0-spine1", "spine5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("failed (carrying nothing): the link leaf0 - spine1; switch "
                          "spine5 (and its 4 links).\n")
    assert "seeds" not in out


def test_the_papers_view_refuses_rails_and_points_to_the_rail_by_rail_one():
    from canopy.engine.fabric.vclos import leaf_spine
    from canopy.engine.generators import generate
    from canopy.engine.model.errors import CanopyError
    topo = generate("cluster", {"servers": "4", "scale_out": "leaf-spine", "leaf": "rail"})
    with pytest.raises(CanopyError, match="isolates it rail by rail"):
        leaf_spine(topo)


def test_a_jobs_size_may_be_spelled_as_on_the_command_line(tmp_path):
    from canopy.engine.model.errors import CanopyError
    from canopy.engine.model.workloads import load_jobs
    path = tmp_path / "jobs.json"
    path.write_text('{"format": "canopy-jobs", "version": 1, "jobs": [{"name": "a", '
                    '"nodes": ["n0.gpu0", "n0.gpu1"], "size": "256M"}]}')
    assert load_jobs(path)[0].size == 256 * 2**20
    path.write_text('{"format": "canopy-jobs", "version": 1, "jobs": [{"name": "a", '
                    '"nodes": ["n0.gpu0", "n0.gpu1"], "size": "lots"}]}')
    with pytest.raises(CanopyError, match="is not a message size such as 1M"):
        load_jobs(path)


def test_a_fabric_analysis_past_the_memory_budget_is_refused_at_once(monkeypatch):
    import pytest

    from canopy.engine.fabric.analysis import analyze
    from canopy.engine.generators import generate
    from canopy.engine.model.limits import LimitError
    from canopy.engine.model.workloads import Job
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "64M")
    topology = generate("cluster", {"servers": 128, "gpus": 8})
    jobs = [Job(f"job{j}", tuple(f"n{s}.gpu{g}" for s in range(j * 64, j * 64 + 64)
                                 for g in range(8))) for j in range(2)]
    start = time.process_time()
    with pytest.raises(LimitError, match="the fabric analysis of 2 jobs on 1,024 GPUs"):
        analyze(topology, jobs)
    assert time.process_time() - start < 5
