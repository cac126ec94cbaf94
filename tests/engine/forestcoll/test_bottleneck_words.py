"""The bottleneck cut in words (engine/forestcoll/bottleneck_words.py) on the bundled samples."""

from fractions import Fraction

from canopy.engine.forestcoll.bottleneck_words import crossing_links, describe_cut, describe_nodes
from canopy.engine.io.topology_json import load_sample


def test_a_whole_server_is_named_with_its_nic_uplinks():
    topo = load_sample("aws-p4d-2x8")
    cut = [n.id for n in topo.nodes if n.group == "h1"]
    bandwidth = sum((bw for _, _, bw in crossing_links(topo, cut)), start=Fraction(0))
    text = describe_cut(topo, cut, bandwidth)
    assert text == ("S* holds 8 of 16 GPUs (the GPUs of server h1); 50 GB/s leave it over "
                    "the 4 NIC uplinks of h1 (12.5 GB/s each).")


def test_the_smaller_side_is_named_when_s_star_is_almost_everything():
    topo = load_sample("dgx-a100-2x8")
    cut = [n for n in topo.node_ids() if n != "n0.gpu0"]
    text = describe_cut(topo, cut, Fraction(325))
    assert text == ("S* holds 15 of 16 GPUs (all but n0.gpu0); 325 GB/s leave it over "
                    "the 2 links into n0.gpu0.")
    assert {(u, v) for u, v, _ in crossing_links(topo, cut)} == {
        ("n0.nvswitch", "n0.gpu0"), ("n0.nic0", "n0.gpu0")}


def test_loose_nodes_are_listed_briefly():
    topo = load_sample("dgx-a100-2x8")
    names = [f"n1.gpu{i}" for i in range(6)]
    assert describe_nodes(topo, names) == "n1.gpu0, n1.gpu1, n1.gpu2, n1.gpu3 and 2 more nodes"
    assert describe_nodes(topo, topo.node_ids()) == "servers n0, n1 and ib0, ib1"


def test_only_gpus_are_named_as_gpus_and_the_unit_is_the_one_asked_for():
    """aws-p4d: S* is server h1 without its NICs; the sentence names the server's GPUs,
    never its CPUs or PCIe switches, and states bandwidths in Gb/s when asked."""
    from canopy.engine.forestcoll.optimum import optimum
    topo = load_sample("aws-p4d-2x8")
    opt = optimum(topo)
    text = describe_cut(topo, opt.cut_names(), opt.cut_bandwidth, "Gb/s")
    assert text == ("S* holds 8 of 16 GPUs (the GPUs of server h1); 384 Gb/s leave it over "
                    "the 4 links into the NICs of h1 (96 Gb/s each).")


def test_the_cli_states_the_cut_in_the_unit_asked_for(capsys):
    from canopy.cli import main
    assert main(["solve", "samples/dgx-a100-2x8.json", "--bandwidth-unit", "Gb/s"]) == 0
    out = capsys.readouterr().out
    assert "GB/s" not in out
    assert "2600 Gb/s leave it" in out and "optimal algbw:   2773.33 Gb/s" in out
    assert "13 trees per GPU reach the optimum (k = 13; Prop. 3's k = 13)" in out
