"""vClos rail by rail on a rail-optimised leaf-spine: exact small cases, refusals, ECMP."""

from fractions import Fraction

import pytest

from canopy.cli import main
from canopy.engine.fabric.analysis import analyze
from canopy.engine.fabric.plans import job_topology
from canopy.engine.fabric.vclos_rails import RailPlacer, rail_fabric, vclos_placer
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import save_topology
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import path_links
from canopy.engine.model.workloads import Job
from canopy.engine.network.indexed import Network

NIC = 25           # GB/s per NIC, one NIC per GPU
GPUS = 2           # T, GPUs per server; 2 NICs, so 2 rails


def rails(per_leaf, oversubscription="1"):
    """4 servers of 2 GPUs, each GPU's NIC on its rail: 2 rails, 4 / per_leaf pods, 2 spines."""
    return generate("cluster", {"servers": "4", "gpus": str(GPUS), "nic_bw": str(NIC),
                                "scale_out": "leaf-spine", "leaf": "rail",
                                "servers_per_leaf": str(per_leaf), "spines": "2",
                                "oversubscription": oversubscription})


def crossing_jobs():
    """Two jobs of 2 servers, as listed each with one server in each half of the fabric."""
    return [Job("a", ("n0.gpu0", "n0.gpu1", "n2.gpu0", "n2.gpu1"), "allgather", "forestcoll"),
            Job("b", ("n1.gpu0", "n1.gpu1", "n3.gpu0", "n3.gpu1"), "allgather", "forestcoll")]


def test_the_rails_pods_and_ports_of_a_rail_optimised_leaf_spine():
    fabric = rail_fabric(rails(per_leaf=1, oversubscription="1/2"))
    assert list(fabric.pods) == ["pod 0", "pod 1", "pod 2", "pod 3"]
    assert [r.name for r in fabric.rails] == ["rail 0", "rail 1"]
    assert fabric.rails[1].leaf_of == {"pod 0": "leaf0.1", "pod 1": "leaf1.1",
                                       "pod 2": "leaf2.1", "pod 3": "leaf3.1"}
    # a rail leaf has one 25 GB/s downlink and 25 GB/s (1/2 oversubscribed) to each spine
    assert all(r.port == NIC and r.per_server == 1 for r in fabric.rails)
    assert set(fabric.rails[0].ports.values()) == {1}
    assert fabric.per_server == GPUS and fabric.spines == ["spine0", "spine1"]


def test_each_job_is_isolated_on_every_rail_with_the_closed_form_throughput():
    """One server per pod: a job of 2 servers is a stage-2 vClos of 2 pods, and on each
    rail 1 spine (its 1 rail NIC per server under each leaf), one 25 GB/s port reserved
    per (leaf, spine). Alone on its reservation, the job's optimum is the server cut:
    x* = R·b / T = 2 · 25 / 2 = 25 GB/s, exactly what the fabric gives it unshared."""
    topo = rails(per_leaf=1, oversubscription="1/2")
    placer = vclos_placer(topo)
    assert isinstance(placer, RailPlacer)
    held = []
    for name in ("a", "b"):
        alloc = placer.place(name, 4)
        assert alloc.accepted and alloc.stage == 2
        assert [r["spines"] for r in alloc.rails] == [["spine0"], ["spine0"]]
        assert [r["reserved_gbps"] for r in alloc.rails] == [NIC, NIC]
        network = job_topology(topo, Job(name, tuple(alloc.nodes)), placer.switches(alloc),
                               placer.reserved(alloc))
        leaf_spine = {frozenset((k.source, k.target)) for k in network.links
                      if k.source.startswith("leaf")}
        assert len(leaf_spine) == 4            # 2 rails x 2 leaves x 1 spine, no other
        assert find_optimum(Network.from_topology(network)).x == Fraction(2 * NIC, GPUS)
        held.append(leaf_spine)
    assert [placer.place("a", 4).nodes, placer.place("c", 2).refused] == [
        [], "it needs 2 compute nodes but only 0 are idle."]
    assert not held[0] & held[1]
    result = analyze(topo, crossing_jobs(), "vclos")
    assert [j.nodes for j in result.jobs] == [
        ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"], ["n2.gpu0", "n2.gpu1", "n3.gpu0", "n3.gpu1"]]
    assert all(j.slowdowns == [1.0] for j in result.jobs)
    used = [{k for t in j.plan.trees for e in t.edges for k in path_links(e.path)}
            for j in result.jobs]
    assert not used[0] & used[1]


def test_a_fragmented_rail_refuses_the_job_and_names_the_rail():
    topo = rails(per_leaf=1, oversubscription="1/2")
    for link in topo.links:          # pod 3's rail-1 leaf keeps no spine port
        if link.source == "leaf3.1":
            link.failed = True
    placer = vclos_placer(topo)
    assert placer.place("a", 4).accepted          # pods 0 and 1
    refused = placer.place("b", 4).refused
    assert refused.startswith("rail 1 is fragmented: 4 compute nodes are idle")


def test_vclos_against_ecmp_on_rails():
    """Two servers per pod: ECMP spreads the jobs' cross-pod flows over 2 spines and they
    collide (slowdown up to 2); vClos puts each job in a pod of its own (stage 1), where
    each rail's traffic turns in that rail's leaf: slowdown 1."""
    topo = rails(per_leaf=2)
    ecmp = analyze(topo, crossing_jobs(), "ecmp", seeds=8)
    assert max(j.p99 for j in ecmp.jobs) == 2.0 and min(j.mean for j in ecmp.jobs) > 1
    vclos = analyze(topo, crossing_jobs(), "vclos")
    assert [j.placement["stage"] for j in vclos.jobs] == [1, 1]
    assert all(j.mean == 1 for j in vclos.jobs)
    assert [r["leaves"] for r in vclos.jobs[1].placement["rails"]] == [["leaf1.0"], ["leaf1.1"]]


def test_cli_reports_each_rail_a_job_holds(tmp_path, capsys):
    topo = rails(per_leaf=1, oversubscription="1/2")
    topo.jobs = crossing_jobs()
    path = tmp_path / "rails.json"
    save_topology(topo, path)
    assert main(["fabric", str(path), "--routing", "vclos",
                 "--json", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert ("rail 1: leaves leaf2.1, leaf3.1; spines spine0; 25 GB/s reserved up from each "
            "leaf") in out


def test_pods_must_be_whole():
    topo = rails(per_leaf=2)
    for link in topo.links:     # n1's rail-1 NIC moved to pod 1's leaf
        if link.source == "n1.nic1":
            link.target = "leaf1.1"
    with pytest.raises(ScheduleError, match="pods"):
        rail_fabric(topo)
