"""Generators: registry introspection, sizes and degrees, layouts, and known optima."""

from collections import Counter, defaultdict
from fractions import Fraction

import networkx as nx
import pytest

from canopy.cli import main
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import GENERATORS, ParameterError, generate
from canopy.engine.generators.gpu_models import GPU_MODELS
from canopy.engine.generators.params import PARAM_TYPES
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.topology import find_problems
from canopy.engine.network.indexed import Network


def optimum(topo):
    return find_optimum(Network.from_topology(topo))


def degrees(topo):
    """Distinct neighbours of each node (a duplex link counts once)."""
    nbrs = defaultdict(set)
    for link in topo.links:
        nbrs[link.source].add(link.target)
        nbrs[link.target].add(link.source)
    return {n: len(nbrs[n]) for n in topo.node_ids()}


def egress(topo):
    out = defaultdict(Fraction)
    for (u, _), c in topo.capacities().items():
        out[u] += c
    return out


# ------------------------------------------------------------------ registry


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_every_kind_builds_a_valid_laid_out_topology_with_its_recipe(kind):
    topo = generate(kind)
    assert find_problems(topo) == []
    positions = [(n.x, n.y) for n in topo.nodes]
    assert all(x is not None and y is not None for x, y in positions)
    assert len(set(positions)) == len(positions), "two nodes share a position"
    recipe = topo.extra["generator"]
    assert recipe["kind"] == kind
    again = generate(kind, recipe["params"])
    assert again.nodes == topo.nodes and again.links == topo.links


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_every_kind_solves_to_its_optimum(kind):
    topo = generate(kind)
    assert solve(topo, "allreduce").algbw == optimum(topo).algbw("allreduce")


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_param_specs_are_introspectable_and_round_trip(kind):
    gen = GENERATORS[kind]
    assert gen.title and gen.summary
    for spec in gen.params:
        assert spec.type in PARAM_TYPES and spec.help
        assert spec.flag.startswith("--") and spec.label
        assert spec.parse(spec.format(spec.default)) == spec.default
        if spec.choices:
            assert all(v in spec.choices for v in
                       (spec.default if isinstance(spec.default, tuple) else (spec.default,)))
        assert isinstance(spec.is_relevant(gen.defaults()), bool)


def test_relevance_follows_other_parameters():
    spec = GENERATORS["cluster"].param("oversubscription")
    assert not spec.is_relevant({"scale_out": "rail"})
    assert spec.is_relevant({"scale_out": "leaf-spine"})
    assert GENERATORS["dragonfly"].param("terminal_bw").is_relevant({"terminals": 2})


@pytest.mark.parametrize("kind, values, words", [
    ("torus", {"dims": "4xx"}, "--dims"),
    ("torus", {"dims": "4x0"}, "at least 1"),
    ("ring", {"n": "eight"}, "whole number"),
    ("ring", {"n": "1"}, "at least 2"),
    ("ring", {"bandwidth": "-3"}, "positive"),
    ("ring", {"wires": "3"}, "no parameter 'wires'"),
    ("ring", {"bidirectional": "maybe"}, "yes or no"),
    ("cluster", {"fabric": "crossbar"}, "nvswitch, mesh, ring"),
    ("cluster", {"nics_per_gpu": "3/2"}, "--nics-per-gpu"),
    ("cluster", {"nics_per_gpu": "1/3"}, "dividing"),
    ("cluster", {"nics_per_gpu": "0"}, "cannot reach"),
    ("cluster", {"rails": "9"}, "--rails"),
    ("cluster", {"oversubscription": "0"}, "positive"),
    ("multi-dim", {"shapes": "ring,fc"}, "same number"),
    ("multi-dim", {"shapes": "ring,star,fc"}, "'star'"),
    ("torus", {"bandwidth": "50,25"}, "one per dimension"),
    ("dragonfly", {"groups": "4", "routers": "4"}, "multiple of 3"),
    ("torus", {"dims": "1000x1000"}, "limit"),
    ("fully-connected", {"n": "2000"}, "limit"),
    ("nonsense", {}, "no generator"),
])
def test_bad_parameters_are_one_sentence_naming_them(kind, values, words):
    with pytest.raises(ParameterError) as info:
        generate(kind, values)
    assert words in str(info.value)
    assert str(info.value).endswith(".")


def test_typed_values_are_accepted_like_text():
    a = generate("torus", {"dims": (3, 3), "bandwidth": (Fraction(25),)})
    b = generate("torus", {"dims": "3x3", "bandwidth": "25"})
    assert a.links == b.links


# ------------------------------------------------------------------ ring, clique, hypercube


@pytest.mark.parametrize("n", [3, 4, 5, 8, 13])
def test_bidirectional_ring_optimum_is_2Nb_over_N_minus_1(n):
    b = Fraction(50)
    topo = generate("ring", {"n": n, "bandwidth": b})
    assert len(topo.nodes) == n and len(topo.links) == n
    assert set(degrees(topo).values()) == {2}
    assert optimum(topo).algbw() == 2 * n * b / (n - 1)


@pytest.mark.parametrize("n", [2, 3, 6, 9])
def test_one_way_ring_optimum_is_Nb_over_N_minus_1(n):
    b = Fraction(25, 2)
    topo = generate("ring", {"n": n, "bandwidth": b, "bidirectional": False})
    assert all(not link.duplex for link in topo.links)
    assert set(egress(topo).values()) == {b}
    assert optimum(topo).algbw() == n * b / (n - 1)


@pytest.mark.parametrize("n", [2, 5, 8])
def test_fully_connected(n):
    topo = generate("fully-connected", {"n": n, "bandwidth": "40"})
    assert len(topo.links) == n * (n - 1) // 2
    assert set(degrees(topo).values()) == {n - 1}
    assert optimum(topo).algbw() == n * 40


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_hypercube(d):
    n = 2 ** d
    topo = generate("hypercube", {"dimension": d, "bandwidth": "50"})
    assert len(topo.nodes) == n and len(topo.links) == d * n // 2
    assert set(degrees(topo).values()) == {d}
    # The single-node cut V - {v} is the bottleneck: 1/x* = (N-1)/(d·b).
    assert optimum(topo).inverse_x == Fraction(n - 1, d * 50)


# ------------------------------------------------------------------ torus and mesh


def test_torus_4x4x4_counts_degrees_and_optimum():
    topo = generate("torus", {"dims": "4x4x4", "bandwidth": "50"})
    assert len(topo.nodes) == 64 and len(topo.links) == 3 * 64
    assert set(degrees(topo).values()) == {6}
    assert optimum(topo).inverse_x == Fraction(63, 300)


def test_torus_dimensions_of_size_2_and_1_and_per_dimension_bandwidth():
    topo = generate("torus", {"dims": "2x3x1", "bandwidth": "10,20,30"})
    caps = Counter(link.bandwidth for link in topo.links)
    assert caps == {Fraction(10): 3, Fraction(20): 6}
    assert set(degrees(topo).values()) == {3}


@pytest.mark.parametrize("dims, links", [((3, 3), 12), ((4, 4), 24), ((2, 3, 4), 46), ((5,), 4)])
def test_mesh_counts(dims, links):
    topo = generate("mesh", {"dims": "x".join(map(str, dims))})
    assert len(topo.links) == links
    assert max(degrees(topo).values()) <= 2 * len(dims)


def test_mesh_3x3_bottleneck_is_a_corner():
    opt = optimum(generate("mesh", {"dims": "3x3", "bandwidth": "50"}))
    assert opt.inverse_x == Fraction(8, 100)


# ------------------------------------------------------------------ Kautz


@pytest.mark.parametrize("d, n", [(2, 3), (2, 12), (3, 10), (3, 27), (4, 20)])
def test_kautz_is_d_regular_and_strongly_connected(d, n):
    topo = generate("kautz", {"degree": d, "n": n, "bandwidth": "10"})
    assert find_problems(topo) == []
    assert all(not link.duplex for link in topo.links)
    out_bw, in_bw = defaultdict(Fraction), defaultdict(Fraction)
    for link in topo.links:
        out_bw[link.source] += link.bandwidth
        in_bw[link.target] += link.bandwidth
    for i in range(n):
        expected = 10 * (d - sum(1 for k in range(1, d + 1) if (-d * i - k) % n == i))
        assert out_bw[f"n{i}"] == in_bw[f"n{i}"] == expected
    assert nx.is_strongly_connected(topo.digraph())


# ------------------------------------------------------------------ dragonfly


def test_dragonfly_tacos_4x5():
    topo = generate("dragonfly")
    assert len(topo.nodes) == 20 and len(topo.links) == 5 * 6 + 10
    assert set(degrees(topo).values()) == {4}
    group_pairs = Counter(tuple(sorted((link.source[:2], link.target[:2])))
                          for link in topo.links if link.source[:2] != link.target[:2])
    assert set(group_pairs.values()) == {1} and len(group_pairs) == 10
    # Bottleneck: all but one group, fed by that group's 4 global links of 200.
    assert optimum(topo).inverse_x == Fraction(16, 800)


def test_dragonfly_with_terminals_and_several_links_per_group_pair():
    topo = generate("dragonfly", {"groups": 3, "routers": 2, "global_links": 2,
                                  "terminals": 3})
    assert len(topo.compute_nodes()) == 3 * 2 * 3
    assert len(topo.switch_nodes()) == 6
    routers = set(topo.switch_nodes())
    global_links = [link for link in topo.links if link.source in routers
                    and link.target in routers and link.source[:2] != link.target[:2]]
    assert len(global_links) == 3 * 2 * 2 // 2
    assert Counter(tuple(sorted((link.source[:2], link.target[:2])))
                   for link in global_links) == {("g0", "g1"): 2, ("g0", "g2"): 2,
                                                 ("g1", "g2"): 2}
    assert find_problems(topo) == []


# ------------------------------------------------------------------ multi-dimensional


def test_3d_rfs_2x4x8():
    topo = generate("multi-dim", {"dims": "2x4x8", "shapes": "ring,fc,switch",
                                  "bandwidth": "200,100,50"})
    assert len(topo.compute_nodes()) == 64 and len(topo.switch_nodes()) == 8
    deg = degrees(topo)
    assert {deg[n] for n in topo.compute_nodes()} == {1 + 3 + 1}
    assert {deg[n] for n in topo.switch_nodes()} == {8}
    assert set(egress(topo)[n] for n in topo.compute_nodes()) == {200 + 300 + 50}
    # Bottleneck: all but one server's 8 NPUs, fed by 8 switch links of 50.
    assert optimum(topo).inverse_x == Fraction(56, 400)
    assert len({n.group for n in topo.nodes if n.kind == "compute"}) == 8


def test_2d_switch_8x4():
    topo = generate("multi-dim", {"dims": "8x4", "shapes": "switch,switch",
                                  "bandwidth": "300,25"})
    assert len(topo.switch_nodes()) == 4 + 8
    assert optimum(topo).inverse_x == Fraction(24, 200)


# ------------------------------------------------------------------ clusters


def test_cluster_defaults_are_two_dgx_a100():
    topo = generate("cluster")
    assert len(topo.compute_nodes()) == 16
    assert len([n for n in topo.node_ids() if ".nic" in n]) == 16
    assert len([n for n in topo.node_ids() if n.startswith("rail")]) == 8
    assert optimum(topo).inverse_x == Fraction(3, 65)       # ForestColl (arXiv:2402.06787) §5.3


def test_cluster_even_odd_rails_match_the_reference_dgx_sample():
    topo = generate("cluster", {"rails": 2})
    assert optimum(topo).inverse_x == Fraction(3, 65)
    rail_links = Counter(link.target for link in topo.links if link.target.startswith("rail"))
    assert rail_links == {"rail0": 8, "rail1": 8}


def test_cluster_single_switch_and_direct_fabrics():
    for fabric, per_gpu_links in (("mesh", 7), ("ring", 2)):
        topo = generate("cluster", {"servers": 3, "gpus": 8, "fabric": fabric,
                                    "scale_out": "single"})
        assert "n0.nvswitch" not in topo.node_ids()
        assert egress(topo)["n0.gpu3"] == 300 + 25
        assert degrees(topo)["n0.gpu3"] == per_gpu_links + 1
        assert degrees(topo)["ib"] == 24
        assert find_problems(topo) == []


def test_cluster_shared_nics_sit_behind_pcie_switches():
    topo = generate("cluster", {"nics_per_gpu": "1/2", "nic_bw": "12.5", "pcie_bw": "15.75"})
    assert len([n for n in topo.node_ids() if ".pcie" in n]) == 2 * 4
    assert degrees(topo)["n0.pcie0"] == 3
    assert optimum(topo).inverse_x == Fraction(8, 50)      # 4 NICs of 12.5 per server


def test_cluster_two_nics_per_gpu():
    topo = generate("cluster", {"nics_per_gpu": 2, "gpus": 4})
    assert degrees(topo)["n0.gpu1"] == 1 + 2
    assert len([n for n in topo.node_ids() if n.startswith("rail")]) == 8


def test_rail_leaf_spine_bandwidths_and_oversubscription():
    params = {"servers": 4, "gpu_bw": 450, "nic_bw": 50, "scale_out": "leaf-spine",
              "servers_per_leaf": 2, "spines": 4}
    topo = generate("cluster", params)
    leaves = [n for n in topo.node_ids() if n.startswith("leaf")]
    assert len(leaves) == 2 * 8
    up = {link.bandwidth for link in topo.links if link.target.startswith("spine")}
    assert up == {Fraction(100, 4)}
    assert optimum(topo).inverse_x == Fraction(31, 500)    # a GPU's own ingress
    oversubscribed = generate("cluster", {**params, "oversubscription": 4})
    up = {link.bandwidth for link in oversubscribed.links if link.target.startswith("spine")}
    assert up == {Fraction(100, 4 * 4)}
    # Now a pod (16 GPUs) is fed by its 8 leaves' uplinks of 25: 16/200.
    assert optimum(oversubscribed).inverse_x == Fraction(16, 200)


def test_tor_leaf_spine_and_single_leaf():
    topo = generate("cluster", {"servers": 4, "scale_out": "leaf-spine", "leaf": "tor",
                                "servers_per_leaf": 2, "spines": 3, "oversubscription": 2})
    assert sorted(n for n in topo.node_ids() if n.startswith("leaf")) == ["leaf0", "leaf1"]
    assert {link.bandwidth for link in topo.links if link.target.startswith("spine")} == \
        {Fraction(16 * 25, 2 * 3)}
    single = generate("cluster", {"servers": 2, "scale_out": "leaf-spine", "leaf": "tor",
                                  "servers_per_leaf": 2, "rails": 99})
    assert not any(n.startswith("spine") for n in single.node_ids())
    assert find_problems(single) == []


def test_one_server_without_nics():
    topo = generate("cluster", {"servers": 1, "nics_per_gpu": 0})
    assert topo.switch_nodes() == ["n0.nvswitch"]
    assert optimum(topo).algbw() == Fraction(8 * 300, 7)


# ------------------------------------------------------------------ CLI


def test_cli_generate_writes_the_file(tmp_path, capsys):
    out = tmp_path / "ring.json"
    assert main(["generate", "ring", "--n", "5", "--bandwidth", "12.5", "--name", "R",
                 "-o", str(out)]) == 0
    topo = load_topology(out)
    assert topo.name == "R" and len(topo.nodes) == 5
    assert topo.extra["generator"] == {"kind": "ring", "params": {
        "n": "5", "bandwidth": "12.5", "bidirectional": "yes"}}
    assert "wrote" in capsys.readouterr().out


def test_cli_generate_list_describes_every_kind_and_option(capsys):
    assert main(["generate", "--list"]) == 0
    text = capsys.readouterr().out
    for gen in GENERATORS.values():
        assert f"{gen.kind}:" in text
        for spec in gen.params:
            assert spec.flag in text


def test_cli_generate_bad_value_is_one_line_exit_2(tmp_path, capsys):
    code = main(["generate", "torus", "--dims", "4by4", "-o", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    assert code == 2 and "--dims" in err and "Traceback" not in err
    assert not (tmp_path / "t.json").exists()


def test_cli_generate_unknown_option_exits_2(tmp_path):
    with pytest.raises(SystemExit) as info:
        main(["generate", "ring", "--sides", "3", "-o", str(tmp_path / "r.json")])
    assert info.value.code == 2


# ------------------------------------------------------------------ GPU models and units


def test_bandwidth_options_take_units_and_convert_exactly():
    topo = generate("cluster", {"nic_bw": "400Gb/s", "gpu_bw": "450 GB/s"})
    assert {link.bandwidth for link in topo.links if "rail" in link.target} == {50}
    assert topo.extra["generator"]["params"]["nic_bw"] == "50"
    in_bits = generate("cluster", {"nic_bw": "50GB/s"}, unit="Gb/s")
    assert in_bits.extra["generator"]["params"]["nic_bw"] == "400"
    assert {link.bandwidth for link in in_bits.links if "rail" in link.target} == {50}
    # the defaults are GB/s whatever the file's unit: 300 GB/s of NVLink, not 300 Gb/s
    assert {link.bandwidth for link in in_bits.links if "nvswitch" in link.target} == {300}
    assert "Gb/s" in in_bits.name and "GB/s" not in in_bits.name
    with pytest.raises(ParameterError, match="e.g. 400Gb/s"):
        generate("cluster", {"nic_bw": "fast"})


@pytest.mark.parametrize("model", sorted(GPU_MODELS))
def test_every_gpu_model_builds_a_balanced_cluster_and_is_stored(model):
    spec = GPU_MODELS[model]
    topo = generate("cluster", {"gpu": model, "servers": "2"})
    assert find_problems(topo) == []
    assert len(topo.compute_nodes()) == 2 * spec.gpus
    assert topo.extra["gpu"] == spec.record()
    assert topo.extra["generator"]["params"]["gpu"] == model
    per_gpu = sum((link.bandwidth for link in topo.links
                   if "n0.gpu0" in (link.source, link.target) and "nic" not in link.target
                   and "pcie" not in link.target), start=Fraction(0))
    assert per_gpu == spec.gpu_bw
    again = generate("cluster", topo.extra["generator"]["params"])
    assert again.extra["gpu"] == topo.extra["gpu"]


def test_options_given_with_a_gpu_model_win():
    topo = generate("cluster", {"gpu": "h100", "nic_bw": "200Gb/s", "gpus": "4"})
    assert len(topo.compute_nodes()) == 8
    assert {link.bandwidth for link in topo.links if "rail" in link.target} == {25}
    assert {link.bandwidth for link in topo.links if "nvswitch" in link.target} == {450}


def test_the_mi250_model_is_forestcolls_amd_testbed():
    """Two MI250 servers from --gpu mi250 have the Infinity Fabric links of the bundled
    mi250-2x16 sample (ForestColl's testbed), GCD for GCD."""
    from canopy.engine.io.topology_json import load_sample
    built = generate("cluster", {"gpu": "mi250"})
    sample = load_sample("mi250-2x16")

    def fabric(topo):
        return {(link.source, link.target, link.bandwidth) for link in topo.links
                if link.source.startswith("n0.gpu") and link.target.startswith("n0.gpu")}
    assert fabric(built) == fabric(sample)


def test_the_exports_and_compare_use_the_models_sms(tmp_path, capsys):
    from canopy.cli import main
    path = tmp_path / "h100.json"
    assert main(["generate", "cluster", "--gpu", "h100", "--servers", "2", "-o",
                 str(path)]) == 0
    assert main(["solve", str(path), "--msccl", str(tmp_path / "ag.xml")]) == 0
    out = capsys.readouterr().out
    assert "132 thread blocks per GPU (the topology's NVIDIA H100 SXM (DGX H100) SMs" in out
    assert "github.com/microsoft/msccl" in out
    assert main(["compare", str(path), "--sizes", "1M", "--algorithms", "ring"]) == 0
    assert "laid out for 132 thread blocks per GPU" in capsys.readouterr().out
    assert main(["solve", "samples/forestcoll-fig2.json", "--msccl",
                 str(tmp_path / "f.xml")]) == 0
    assert "names no GPU model, so an A100's SMs" in capsys.readouterr().out
