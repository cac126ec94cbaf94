"""The bundled samples: each loads, validates and solves to its known optimum, is laid
out, matches the recipe it records, and is documented in samples/README.md."""

from fractions import Fraction
from importlib import resources

import pytest

from canopy.cli import main
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.io.nccl_topology_import import NcclImportOptions, import_nccl_file
from canopy.engine.io.topology_json import load_sample, sample_names, topology_to_dict
from canopy.engine.model.topology import Topology, find_problems
from canopy.engine.network.indexed import Network
from tests.shared_data import needs_shared, shared_path

# 1/x* (exact) and k of every sample; see samples/README.md for the bottleneck of each.
EXPECTED = {
    "aws-p4d-2x8": (Fraction(1, 6), 12),            # NICs behind NCCL's 12 GB/s Gen3 x16
    "dgx-a100-2x8": (Fraction(3, 65), 13),          # ForestColl §5.3: 346.67 GB/s
    "dgx-a100-4x8": (Fraction(3, 25), 1),
    "dgx-h100-2x8": (Fraction(3, 100), 2),
    "forestcoll-fig2": (Fraction(1), 1),
    "leaf-spine-jobs": (Fraction(14, 25), 1),
    "hypercube-3d": (Fraction(7, 150), 3),
    "mesh-2d-3x3": (Fraction(2, 25), 1),
    "mi250-2x16": (Fraction(15, 166), 83),          # ForestColl §4.5: 354.13 GB/s, k=83
    "mi250-8plus8": (Fraction(1, 13), 13),
    "rail-leaf-spine-4x8": (Fraction(31, 500), 20),
    "tacos-2d-switch-8x4": (Fraction(3, 25), 1),
    "tacos-3d-rfs-2x4x8": (Fraction(7, 50), 1),
    "tacos-dragonfly-4x5": (Fraction(1, 50), 1),
    "tpu-v4-4x4x4-torus": (Fraction(21, 100), 2),
}
SERVERS = {"aws-p4d-2x8", "dgx-a100-2x8", "dgx-a100-4x8", "dgx-h100-2x8", "mi250-2x16",
           "leaf-spine-jobs",
           "mi250-8plus8", "rail-leaf-spine-4x8", "tacos-2d-switch-8x4", "tacos-3d-rfs-2x4x8",
           "tacos-dragonfly-4x5"}
NAMES = [n.removesuffix(".json") for n in sample_names()]


def test_at_least_ten_samples_and_all_expected():
    assert len(NAMES) >= 10
    assert sorted(NAMES) == sorted(EXPECTED)


@pytest.mark.parametrize("name", NAMES)
def test_sample_loads_validates_and_has_its_optimum(name):
    topo = load_sample(name)
    assert find_problems(topo) == []
    opt = find_optimum(Network.from_topology(topo, name))
    assert (opt.inverse_x, opt.k) == EXPECTED[name]


@pytest.mark.parametrize("name", NAMES)
def test_sample_solves_to_a_verified_optimal_schedule(name):
    schedule = solve(load_sample(name))          # solve() verifies before returning
    inverse_x, k = EXPECTED[name]
    assert schedule.optimum.k == k and schedule.k <= k   # the fewest trees at the optimum
    assert schedule.algbw == len(schedule.compute_nodes) / inverse_x


@pytest.mark.parametrize("name", NAMES)
def test_sample_is_laid_out_and_grouped(name):
    topo = load_sample(name)
    positions = [(n.x, n.y) for n in topo.nodes]
    assert all(x is not None and y is not None for x, y in positions)
    assert len(set(positions)) == len(positions)
    if name in SERVERS:
        assert all(n.group for n in topo.nodes if n.kind == "compute")
        assert len({n.group for n in topo.nodes if n.kind == "compute"}) >= 2


def _without_name(topo: Topology) -> dict:
    """The topology's JSON without its name and jobs (neither is part of a recipe)."""
    data = topology_to_dict(topo)
    data.pop("name")
    data.pop("jobs", None)
    return data


@pytest.mark.parametrize("name", [n for n in NAMES if "generator" in load_sample(n).extra])
def test_generated_sample_matches_its_recipe(name):
    topo = load_sample(name)
    recipe = topo.extra["generator"]
    assert _without_name(generate(recipe["kind"], recipe["params"])) == _without_name(topo)


def test_at_least_eight_samples_come_from_generators():
    assert sum("generator" in load_sample(n).extra for n in NAMES) >= 8


@needs_shared
def test_p4d_sample_matches_its_nccl_import():
    topo = load_sample("aws-p4d-2x8")
    recipe = topo.extra["imported_from"]
    path = shared_path("data", "nccl-topo", recipe["file"])
    options = NcclImportOptions(hosts=recipe["hosts"], net=recipe["net"],
                                nic_bw=recipe["nic_bw"], nvswitch_bw=recipe["nvswitch_bw"])
    again = import_nccl_file(path, options).topology
    again.extra["imported_from"]["file"] = recipe["file"]
    assert _without_name(again) == _without_name(topo)


def test_mi250_8plus8_is_gpus_0_to_7_of_each_node_of_the_16_gpu_sample():
    """ForestColl (arXiv:2402.06787) §5.2: the 8+8 setting enables GPUs 0-7 of each cluster."""
    full, half = load_sample("mi250-2x16"), load_sample("mi250-8plus8")
    keep = {f"n{s}.gpu{g}" for s in (0, 1) for g in range(8)} | {"ib"}
    assert set(half.node_ids()) == keep
    expected = {(link.source, link.target, link.bandwidth, link.duplex) for link in full.links
                if link.source in keep and link.target in keep}
    assert {(link.source, link.target, link.bandwidth, link.duplex)
            for link in half.links} == expected


@needs_shared
@pytest.mark.parametrize("name", ["dgx-a100-2x8", "mi250-2x16", "forestcoll-fig2"])
def test_reference_samples_are_unchanged(name):
    original = shared_path("data", "topologies", f"{name}.json")
    bundled = resources.files("canopy.samples").joinpath(f"{name}.json").read_bytes()
    assert bundled == original.read_bytes()


def test_readme_documents_every_sample():
    readme = resources.files("canopy.samples").joinpath("README.md").read_text(encoding="utf-8")
    for name in NAMES:
        assert f"{name}.json" in readme
        opt = find_optimum(Network.from_topology(load_sample(name)))
        assert f"{float(opt.algbw()):.2f}".rstrip("0").rstrip(".") in readme, name


def test_cli_samples_lists_and_copies(tmp_path, capsys):
    assert main(["samples", "--optimum"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in NAMES)
    assert "346.67 GB/s" in out
    assert main(["samples", "dgx-h100-2x8", "-o", str(tmp_path / "h.json")]) == 0
    assert (tmp_path / "h.json").exists()
    assert main(["samples", "-o", str(tmp_path / "x.json")]) == 2
    assert main(["samples", "no-such-sample"]) == 2
