"""The design advisor against brute force over every cut of small random networks."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canopy.cli import main
from canopy.engine.advise.classes import CLASS_KEY, link_classes, node_role
from canopy.engine.advise.curves import class_curve
from canopy.engine.advise.failures import failure_scan
from canopy.engine.advise.parametric import ParametricNetwork, solve_ratio
from canopy.engine.advise.report import advise
from canopy.engine.advise.target import cheapest_upgrade
from canopy.engine.forestcoll.optimum import optimum
from canopy.engine.io.topology_json import load_sample, loads_topology, save_topology
from canopy.engine.model.topology import Topology
from tests.strategies import topologies

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def classed(draw: st.DrawFn) -> Topology:
    """A random topology whose links are put in up to three named classes (or none)."""
    topo = draw(topologies(max_compute=4, max_switch=2))
    for link in topo.links:
        name = draw(st.sampled_from([None, "a", "b", "c"]))
        if name:
            link.extra[CLASS_KEY] = name
    return topo


def all_cuts(pnet: ParametricNetwork) -> list[tuple[int, ...]]:
    compute = set(pnet.compute)
    cuts = []
    for size in range(1, pnet.n):
        for cut in itertools.combinations(range(pnet.n), size):
            inside = compute & set(cut)
            if inside and inside != compute:
                cuts.append(cut)
    return cuts


def brute_lines(pnet: ParametricNetwork, c: int, base: list[Fraction]):
    """(intercept, slope) of every cut's ratio in class c's bandwidth."""
    lines = []
    for cut in all_cuts(pnet):
        k = pnet.compute_in(cut)
        a = s = Fraction(0)
        for j in pnet.crossing(cut):
            a += pnet.fixed[j]
            for d, coef in pnet.terms[j].items():
                if d == c:
                    s += coef
                else:
                    a += coef * base[d]
        lines.append((a / k, s / k))
    return lines


def brute_ratio(pnet: ParametricNetwork, caps: list[Fraction]) -> Fraction:
    best = None
    for cut in all_cuts(pnet):
        value = sum((caps[j] for j in pnet.crossing(cut)), Fraction(0)) / pnet.compute_in(cut)
        best = value if best is None else min(best, value)
    return best


def brute_envelope(lines):
    """Breakpoints (b > 0 where the slope changes) of min over lines, and f. Cuts with the
    same line are one line here (the minimum, its breakpoints and the crossings are those
    of the distinct lines)."""
    lines = set(lines)

    def f(b):
        return min(a + s * b for a, s in lines)
    candidates = set()
    for (a1, s1), (a2, s2) in itertools.combinations(lines, 2):
        if s1 != s2:
            b = (a2 - a1) / (s1 - s2)
            if b > 0:
                candidates.add(b)
    breakpoints = []
    for b in sorted(candidates):
        low = f(b)
        active = [s for a, s in lines if a + s * b == low]
        if min(active) != max(active):
            breakpoints.append(b)
    return f, breakpoints, candidates


@SETTINGS
@given(classed())
def test_curves_thresholds_and_doubles_match_brute_force(topo):
    pnet = ParametricNetwork.from_topology(topo)
    today = pnet.today()
    x = solve_ratio(pnet, today).ratio
    assert x == optimum(topo).x == brute_ratio(pnet, pnet.capacities(today))
    for c in range(len(pnet.classes)):
        curve = class_curve(pnet, c)
        f, breakpoints, candidates = brute_envelope(brute_lines(pnet, c, today))
        assert curve.breakpoints == breakpoints
        for b in [Fraction(0), today[c], 2 * today[c], *candidates, *breakpoints,
                  Fraction(1, 3), Fraction(7)]:
            assert curve.at(b) == f(b)
        lowest = min(b for b in [Fraction(0), today[c], *candidates]
                     if b <= today[c] and f(b) == f(today[c]))
        assert curve.threshold == lowest
        slopes_right = min(s for a, s in brute_lines(pnet, c, today)
                           if a + s * today[c] == f(today[c]))
        assert curve.limits == (slopes_right > 0)


@SETTINGS
@given(classed())
def test_failures_match_brute_force_for_every_element(topo):
    pnet = ParametricNetwork.from_topology(topo)
    caps = pnet.capacities(pnet.today())
    position = {e: j for j, e in enumerate(pnet.edges)}
    index = {name: i for i, name in enumerate(pnet.names)}
    scan = failure_scan(pnet)
    covered = {}
    for failure in scan:
        for member in failure.members:
            covered[(failure.kind, member)] = failure.ratio
    ratios = [f.ratio for f in scan]
    assert ratios == sorted(ratios)
    for i, link in enumerate(topo.links):
        after = list(caps)
        for u, v in link.directions():
            after[position[(index[u], index[v])]] -= link.bandwidth
        assert covered[("link", i)] == brute_ratio(pnet, after)
    for node in topo.nodes:
        if node.is_compute:
            continue
        s = index[node.id]
        after = [Fraction(0) if s in e else cap for e, cap in zip(pnet.edges, caps,
                                                                  strict=True)]
        assert covered[("switch", node.id)] == brute_ratio(pnet, after)


@SETTINGS
@given(classed(), st.data())
def test_target_reaches_and_every_raised_class_is_needed(topo, data):
    pnet = ParametricNetwork.from_topology(topo)
    today = pnet.today()
    x = solve_ratio(pnet, today).ratio
    priced = data.draw(st.lists(st.sampled_from(range(len(pnet.classes))), min_size=1,
                                unique=True))
    prices = {c: data.draw(st.sampled_from([Fraction(1), Fraction(3, 2), Fraction(4)]))
              for c in priced}
    settings_free = list(today)
    for c in priced:
        settings_free[c] = None
    reach = solve_ratio(pnet, settings_free)
    top = reach.ratio if reach is not None else 3 * x
    target = x + (top - x) * data.draw(st.sampled_from([Fraction(1, 4), Fraction(1, 2), 1]))
    answer = cheapest_upgrade(pnet, target, prices)
    assert brute_ratio(pnet, pnet.capacities(answer.bandwidths)) >= target
    assert answer.ratio >= target
    for c in range(len(pnet.classes)):
        assert answer.bandwidths[c] >= today[c]
        if c not in prices:
            assert answer.bandwidths[c] == today[c]
        elif answer.bandwidths[c] > today[c]:
            lowered = list(answer.bandwidths)
            lowered[c] -= (answer.bandwidths[c] - today[c]) / 1000
            assert brute_ratio(pnet, pnet.capacities(lowered)) < target
    # the price is the least over all cuts: scipy's LP over every cut agrees
    from scipy.optimize import linprog
    rows, rhs = [], []
    for cut in all_cuts(pnet):
        k = pnet.compute_in(cut)
        coeffs = [Fraction(0)] * len(priced)
        held = Fraction(0)
        for j in pnet.crossing(cut):
            held += pnet.fixed[j]
            for d, a in pnet.terms[j].items():
                if d in prices:
                    coeffs[priced.index(d)] += a
                else:
                    held += a * today[d]
        rows.append([-float(a) for a in coeffs])
        rhs.append(float(held - target * k))
    weights = [float(prices[c] * len(pnet.classes[c].links)) for c in priced]
    lp = linprog(weights, A_ub=rows, b_ub=rhs, bounds=[(float(today[c]), None) for c in priced],
                 method="highs")
    best = lp.fun - sum(w * float(today[c]) for w, c in zip(weights, priced, strict=True))
    assert float(answer.price) == pytest.approx(best, rel=1e-6, abs=1e-9)


def test_roles_and_automatic_classes_of_a_leaf_spine(tmp_path):
    assert node_role("n0.nic3", False) == "nic"
    assert node_role("leaf1.0", False) == "leaf"
    assert node_role("n7", True) == "gpu"
    topo = load_sample("rail-leaf-spine-4x8.json")
    names = [c.name for c in link_classes(topo)]
    assert names[0].startswith("gpu-") and any("leaf-spine" in n for n in names)
    # a class named from a selection is saved with the topology and read back
    topo.links[0].extra[CLASS_KEY] = "my uplink"
    save_topology(topo, tmp_path / "t.json")
    back = loads_topology((tmp_path / "t.json").read_text(), "t.json")
    assert link_classes(back)[0].name == "my uplink"
    from canopy.engine.io.graphml import load_graphml, save_graphml
    save_graphml(topo, tmp_path / "t.graphml")
    assert link_classes(load_graphml(tmp_path / "t.graphml"))[0].name == "my uplink"


def test_oversubscribed_leaf_spine_uplinks_have_slack():
    from canopy.engine.generators import generate
    topo = generate("cluster", {"servers": "4", "scale_out": "leaf-spine",
                                "oversubscription": "2"})
    advisor = advise(topo, "allreduce", failures=True)
    data = advisor.to_dict()
    uplinks = next(c for c in data["classes"] if c["name"] == "leaf-spine")
    assert Fraction(uplinks["keeps_optimum_down_to"]) < Fraction(uplinks["bandwidth"])
    assert data["optimum_exact"] == str(optimum(topo).algbw("allreduce"))
    assert "optimum_note" in data and data["failures"][0]["loss_percent"] > 0


def _cli(tmp_path, *args, prices=None):
    topo = tmp_path / "t.json"
    save_topology(load_sample("dgx-a100-2x8.json"), topo)
    extra = []
    if prices is not None:
        (tmp_path / "p.json").write_text(json.dumps(prices))
        extra = ["--prices", str(tmp_path / "p.json")]
    return main(["advise", str(topo), *args, *extra])


@pytest.mark.parametrize(("args", "prices", "words"), [
    (["--target", "1000"], {"no-such-class": 1}, "no-such-class"),
    (["--target", "1000"], {}, "names no link class"),
    (["--target", "1e9"], "all", "above what"),
    (["--target", "1000"], "negative", "negative or zero price"),
    (["--target", "1000"], None, "needs --prices"),
])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, capsys, args, prices, words):
    classes = [c.name for c in link_classes(load_sample("dgx-a100-2x8.json"))]
    if prices == "all":
        prices = {c: 1 for c in classes if "nvswitch" not in c}
    elif prices == "negative":
        prices = {classes[0]: -1}
    assert _cli(tmp_path, *args, prices=prices) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_cli_json_states_units_and_target(tmp_path, capsys):
    classes = [c.name for c in link_classes(load_sample("dgx-a100-2x8.json"))]
    out = tmp_path / "advice.json"
    code = _cli(tmp_path, "--collective", "allreduce", "--failures", "--target", "200",
                "--json", str(out), prices={c: 1 for c in classes})
    assert code == 0
    data = json.loads(out.read_text())
    assert data["format"] == "canopy-advice" and data["version"] == 1
    assert {"optimum", "bandwidth", "price", "loss_percent"} <= set(data["units"])
    assert Fraction(data["target"]["optimum"]) >= 200
    for c in data["classes"]:
        assert {"name", "links", "bandwidth", "limits_optimum", "keeps_optimum_down_to",
                "optimum_at_double", "curve"} <= set(c)
    assert all({"element", "optimum", "loss_percent"} <= set(f) for f in data["failures"])


def test_sweep_rows_gain_advice_columns(tmp_path):
    from canopy.engine.sweep.runner import read_rows, run_sweep
    from canopy.engine.sweep.spec import load_spec
    spec = tmp_path / "s.toml"
    spec.write_text(
        'collectives = ["allreduce"]\nalgorithms = ["bound", "advise-failures"]\n'
        'time_limit = 120\n[[generator]]\nkind = "cluster"\n'
        'params = { servers = 4, gpus = 4, scale-out = "leaf-spine", leaf = "tor" }\n'
        'grid = { oversubscription = [1, 4] }\n')
    rows = run_sweep(load_spec(spec), tmp_path / "r.csv", workers=1)
    assert not any(r["error"] for r in rows)
    rows = sorted(read_rows(tmp_path / "r.csv"), key=lambda r: r["param.oversubscription"])
    for row in rows:
        assert row["limiting_class"] and row["worst_failure"].split()[0] in ("link", "switch")
        assert float(row["worst_failure_algbw"]) < float(row["bound_algbw"])
        assert float(row["keeps_down_to.leaf-spine"]) > 0


@pytest.mark.parametrize("params", [
    {"servers": "4", "gpus": "2", "scale_out": "leaf-spine", "oversubscription": "2"},
    {"servers": "3", "gpus": "2", "scale_out": "rail", "nics_per_gpu": "1/2"},
    {"servers": "4", "gpus": "2", "scale_out": "leaf-spine", "leaf": "tor",
     "servers_per_leaf": "2"},
])
def test_failures_of_identical_servers_match_a_solve_of_each_failed_network(params):
    """Every element (not only each class's representative) against the optimum of the
    network with that element marked failed, solved from scratch."""
    import copy

    from canopy.engine.generators import generate
    from canopy.engine.model.errors import TopologyError
    topo = generate("cluster", params)
    pnet = ParametricNetwork.from_topology(topo)
    scan = failure_scan(pnet, start=solve_ratio(pnet, pnet.today()).nodes)
    assert any(f.alike > 1 for f in scan)
    covered = {(f.kind, m): f.ratio for f in scan for m in f.members}

    def solved(failed):
        try:
            return optimum(failed).x
        except TopologyError:
            return Fraction(0)
    for i in range(len(topo.links)):
        failed = copy.deepcopy(topo)
        failed.links[i].failed = True
        assert covered[("link", i)] == solved(failed), topo.links[i].describe()
    for node in topo.nodes:
        if not node.is_compute:
            failed = copy.deepcopy(topo)
            failed.node(node.id).failed = True
            assert covered[("switch", node.id)] == solved(failed), node.id
