import pytest

from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.link_load import link_loads


@pytest.mark.parametrize("collective", ["allgather", "reduce-scatter", "allreduce"])
def test_loads_within_capacity_and_bottleneck_saturated(collective):
    topo = load_sample("dgx-a100-2x8")
    schedule = solve(topo, collective)
    loads = link_loads(schedule, topo)
    assert set(loads) == set(topo.capacities())
    assert max(load.utilisation for load in loads.values()) == 1
    assert all(load.utilisation <= 1 for load in loads.values())
    for load in loads.values():
        assert (load.unit_trees == 0) == (not load.trees)
        assert load.used == load.unit_trees * schedule.tree_bandwidth


def test_links_leaving_the_bottleneck_cut_are_saturated():
    topo = load_sample("mi250-2x16")
    schedule = solve(topo, k=2)
    loads = link_loads(schedule, topo)
    cut = set(schedule.optimum.bottleneck_cut)
    leaving = [link for link in loads if link[0] in cut and link[1] not in cut]
    assert leaving
    assert all(loads[link].unit_trees > 0 for link in leaving)
    assert any(load.utilisation < 1 for load in loads.values())
