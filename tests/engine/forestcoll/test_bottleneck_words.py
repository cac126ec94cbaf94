"""The bottleneck cut in words (engine/forestcoll/bottleneck_words.py) on the bundled samples."""

from fractions import Fraction

from canopy.engine.forestcoll.bottleneck_words import crossing_links, describe_cut, describe_nodes
from canopy.engine.io.topology_json import load_sample


def test_a_whole_server_is_named_with_its_nic_uplinks():
    topo = load_sample("aws-p4d-2x8")
    cut = [n.id for n in topo.nodes if n.group == "h1"]
    bandwidth = sum((bw for _, _, bw in crossing_links(topo, cut)), start=Fraction(0))
    text = describe_cut(topo, cut, bandwidth)
    assert text == ("S* holds 8 of 16 GPUs (server h1); 50 GB/s leave it over the 4 NIC "
                    "uplinks of h1 (12.5 GB/s each).")


def test_the_smaller_side_is_named_when_s_star_is_almost_everything():
    topo = load_sample("dgx-a100-2x8")
    cut = [n for n in topo.node_ids() if n != "n0.gpu0"]
    text = describe_cut(topo, cut, Fraction(325))
    assert text == ("S* holds 15 of 16 GPUs: everything but n0.gpu0; 325 GB/s leave it over "
                    "the 2 links into n0.gpu0.")
    assert {(u, v) for u, v, _ in crossing_links(topo, cut)} == {
        ("n0.nvswitch", "n0.gpu0"), ("n0.nic0", "n0.gpu0")}


def test_loose_nodes_are_listed_briefly():
    topo = load_sample("dgx-a100-2x8")
    names = [f"n1.gpu{i}" for i in range(6)]
    assert describe_nodes(topo, names) == "n1.gpu0, n1.gpu1, n1.gpu2, n1.gpu3 and 2 more nodes"
    assert describe_nodes(topo, topo.node_ids()) == "servers n0, n1 and ib0, ib1"
