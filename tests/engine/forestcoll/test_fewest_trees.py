"""Fewest trees per node at the optimum or within a tolerance
(engine/forestcoll/fewest_trees.py)."""

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings

from canopy.cli import main
from canopy.engine.forestcoll.optimum import find_fixed_k, find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.schedule_json import schedule_to_dict
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.progress import Cancelled
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network
from tests.strategies import topologies


def test_k1_reaches_the_optimum_where_prop3_needs_12():
    topo = load_sample("aws-p4d-2x8")
    schedule = solve(topo)
    assert schedule.k == 1 and schedule.optimum.k == 12
    assert schedule.algbw == schedule.optimal_algbw == verify(topo, schedule)
    data = schedule_to_dict(schedule)
    assert data["k"] == 1 and data["optimality"]["k"] == 12 and not data["fixed_k"]
    assert data["k_search"]["prop3_k"] == 12


def test_dgx_needs_13_and_tolerance_trades_trees_for_bandwidth():
    topo = load_sample("dgx-a100-2x8")
    assert solve(topo).k == 13
    near = solve(topo, tolerance=1)
    assert (near.k, near.algbw) == (7, Fraction(33600, 97))   # 346.39 GB/s
    assert verify(topo, near) == near.algbw
    loose = solve(topo, tolerance="1.5")
    assert (loose.k, loose.algbw) == (1, Fraction(2400, 7))   # 342.86 GB/s


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=4, max_switch=2))
def test_fewest_k_matches_brute_force(topo):
    """The search returns the smallest k whose best fixed-k rate is x* (Thm 14)."""
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    schedule = solve(topo)
    assert schedule.algbw == schedule.optimal_algbw
    # A smaller k may reach x* by Thm 14's rate yet not build as routable compute-to-
    # compute trees on a one-way network (forest.build_fixed_k); the search says which.
    unbuildable = set(schedule.extra["k_search"]["unbuildable_k"])
    for k in range(1, schedule.k):
        assert find_fixed_k(net, k, opt).x < opt.x or k in unbuildable
    for tolerance in (5, 20):
        near = solve(topo, tolerance=tolerance)
        assert near.algbw >= schedule.optimal_algbw * (100 - tolerance) / 100
        skipped = set(near.extra["k_search"]["unbuildable_k"])
        for k in range(1, near.k):
            assert find_fixed_k(net, k, opt).x < opt.x * (100 - tolerance) / 100 \
                or k in skipped


def test_search_can_be_cancelled():
    def progress(phase: str, fraction: float) -> None:
        if phase == "fewest k":
            raise Cancelled
    with pytest.raises(Cancelled):
        solve(load_sample("dgx-a100-2x8"), progress=progress)


def test_cli_prints_both_k_and_takes_a_tolerance(capsys):
    assert main(["solve", "samples/aws-p4d-2x8.json"]) == 0
    assert "1 tree per GPU reaches the optimum (k = 1; Prop. 3's k = 12)" in capsys.readouterr().out
    assert main(["solve", "samples/dgx-a100-2x8.json", "--tolerance", "1"]) == 0
    out = capsys.readouterr().out
    assert "7 trees per GPU are the fewest within 1 % of the optimum" in out and "346.39" in out
    with pytest.raises(SystemExit):
        main(["solve", "samples/dgx-a100-2x8.json", "--tolerance", "100"])


def test_dgx_a100_import_k1_reaches_the_optimum():
    """4 x DGX A100 from an NCCL topology dump (8 GPUs and 8 HDR NICs on 4 PCIe switches, as
    Azure NDv4): Prop. 3 needs 8 trees per node (1625 before the importer read PCI widths as
    NCCL does), one reaches the same 256 GB/s."""
    from canopy.engine.io.nccl_topology_import import NcclImportOptions, import_nccl_file
    from tests import DATA
    dump = DATA / "nccl-dgx-a100-dump.xml"
    options = NcclImportOptions(hosts=4, nvswitch_bw=Fraction(300))
    topo = import_nccl_file(dump, options).topology
    schedule = solve(topo)
    assert (schedule.k, schedule.optimum.k) == (1, 8)
    assert schedule.algbw == schedule.optimal_algbw == Fraction(256)


def test_fewest_trees_schedules_are_the_same_in_every_process():
    # runtime_schedule chooses among the fewest-trees schedules by simulating them, so a
    # schedule that depended on the process (string hashing, the maxflow backend the
    # process has switched to) would change the choice: 2x MI250 allreduce, each
    # tolerance's trees, under two hash seeds and two maxflow backends.
    import os
    import subprocess
    import sys

    code = ("from canopy.engine.forestcoll.solve import solve\n"
            "from canopy.engine.io.topology_json import load_sample\n"
            "t = load_sample('mi250-2x16')\n"
            "for tol in ('1', '4'):\n"
            "    s = solve(t, 'allreduce', tolerance=tol)\n"
            "    print(s.k, repr([(x.root, x.multiplicity, x.edges) for x in s.trees]))\n")
    outputs = set()
    for seed, backend in (("1", "python"), ("2", "scipy")):
        env = dict(os.environ, PYTHONHASHSEED=seed, CANOPY_MAXFLOW=backend)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.add(done.stdout)
    assert len(outputs) == 1
