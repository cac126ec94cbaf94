"""The maxflow interface: exact results, min cuts, and big-integer capacities."""

from canopy.engine.maxflow import INT64_SAFE, FlowNetwork


def diamond(big=1):
    f = FlowNetwork(4)
    f.add_arc(0, 1, 3 * big)
    f.add_arc(0, 2, 2 * big)
    f.add_arc(1, 3, 2 * big)
    f.add_arc(2, 3, 5 * big)
    f.add_arc(1, 2, 1 * big)
    return f


def test_value_and_cut():
    f = diamond()
    assert f.max_flow(0, 3) == 5
    value, side = f.min_cut(0, 3)
    assert value == 5 and 0 in side and 3 not in side


def test_capacity_update():
    f = diamond()
    f.set_capacity(1, 10)
    assert f.max_flow(0, 3) == 7


def test_capacities_beyond_int64_stay_exact():
    big = INT64_SAFE * 3 + 7
    f = diamond(big)
    assert f.max_flow(0, 3) == 5 * big
    value, side = f.min_cut(0, 3)
    assert value == 5 * big and 3 not in side
