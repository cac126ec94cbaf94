from fractions import Fraction

from canopy.engine.comparison.plot_series import collective_time_us, fixed_k_curve, message_sizes
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample


def test_fixed_k_curve_matches_paper():
    curve = dict(fixed_k_curve(load_sample("mi250-2x16"), max_k=3))
    assert curve[1] == 320 and curve[2] == Fraction(1024, 3)
    assert curve[3] <= Fraction(5312, 15)


def test_time_is_bandwidth_bound_without_latency():
    topo = load_sample("forestcoll-fig2")
    schedule = solve(topo)
    assert collective_time_us(schedule, topo, 8 * 10**9) == 10**6  # 8 GB at 8 GB/s


def test_latency_adds_deepest_route():
    topo = load_sample("forestcoll-fig2")
    for link in topo.links:
        link.latency = Fraction(1)
    schedule = solve(topo, "allreduce")
    deepest = max(len(e.path) - 1 for t in schedule.trees for e in t.edges)
    extra = collective_time_us(schedule, topo, 0)
    assert extra >= 2 * deepest
    assert extra <= 2 * max(t.height for t in schedule.trees) * 2 * deepest


def test_message_sizes_span_1k_to_4g():
    sizes = message_sizes()
    assert sizes[0] == 1024 and sizes[-1] == 4 * 1024**3 and len(sizes) == 23
