"""NCCL graph files: the rings Canopy writes are the rings NCCL would read back."""

import pytest

from canopy.cli import main
from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.deploy.nccl_graph import (
    Channel,
    NcclGraphError,
    graph_rings,
    nccl_graph,
    nccl_graph_xml,
    read_nccl_graph,
)
from canopy.engine.deploy.run_commands import run_command
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample


def test_dgx_rings_round_trip_and_reach_the_best_ring_bound():
    topo = load_sample("dgx-a100-2x8")
    graph = nccl_graph(topo)
    back = read_nccl_graph(nccl_graph_xml(graph))
    assert back.channels == graph.channels and len(graph.channels) == 8
    assert [o for o, _ in graph_rings(topo, back)] == [o for o, _ in graph_rings(topo, graph)]
    assert graph.algbw == ring_baseline(topo).algbw
    for channel in graph.channels:      # a rail per channel, every GPU once
        assert channel.net_in == channel.net_out
        assert sorted(channel.gpus) == list(range(8))


def test_devs_are_hexadecimal_as_nccl_reads_them():
    xml = nccl_graph_xml(nccl_graph(generate("cluster", {"servers": 2, "gpus": 16})))
    assert b'dev="0xf"' in xml and b'dev="15"' not in xml
    back = read_nccl_graph(xml)
    assert any(15 in c.gpus for c in back.channels)


def test_servers_that_differ_are_refused_in_one_sentence():
    topo = load_sample("mi250-8plus8")
    with pytest.raises(NcclGraphError, match="same channels|NICs"):
        nccl_graph(topo)


@pytest.mark.parametrize("text,message", [
    (b"<graph/>", "not <graphs>"),
    (b'<graphs version="1"><graph id="1" pattern="3"/></graphs>', "holds no ring graph"),
    (b'<graphs><graph id="0" pattern="4" typeintra="NVL" typeinter="PIX">'
     b'<channel><gpu dev="zz"/></channel></graph></graphs>', "not a hexadecimal"),
    (b'<graphs><graph id="0" pattern="4" typeintra="FAST" typeinter="PIX">'
     b'<channel><gpu dev="0"/></channel></graph></graphs>', "typeintra='FAST'"),
])
def test_bad_graph_files_get_one_sentence(text, message):
    with pytest.raises(NcclGraphError, match=message):
        read_nccl_graph(text, "g.xml")


def test_single_server_channels_have_no_nics():
    graph = nccl_graph(load_sample("hypercube-3d"))
    assert all(c.net_in is None and c.net_out is None for c in graph.channels)
    assert read_nccl_graph(nccl_graph_xml(graph)).channels[0] == Channel(graph.channels[0].gpus)


def test_cli_writes_checks_and_prints_the_run_command(tmp_path, capsys):
    out = tmp_path / "graph.xml"
    assert main(["export-nccl-graph", "samples/dgx-a100-2x8.json", "-o", str(out),
                 "--print-run", "--collective", "allreduce"]) == 0
    text = capsys.readouterr().out
    assert "read back and checked" in text and "213.33 GB/s" in text
    assert f"-x NCCL_GRAPH_FILE={out}" in text and "all_reduce_perf -b 1M -e 1G -f 2" in text
    assert main(["export-nccl-graph", "samples/forestcoll-fig2.json", "-o",
                 str(tmp_path / "x.xml")]) == 2
    assert "NCCL reaches other servers only through NICs" in capsys.readouterr().err


def test_run_commands_for_msccl_and_rccl():
    msccl = run_command("msccl", "/x/ag.xml", "allgather", 32, 16)
    assert "-x MSCCL_XML_FILES=/x/ag.xml" in msccl and "NCCL_ALGO=MSCCL,RING,TREE" in msccl
    rccl = run_command("rccl", "/x/ag.xml", "allgather", 32, 16)
    assert "RCCL_MSCCL_FORCE_ENABLE=1" in rccl and "MSCCL_ALGO_DIR=/x" in rccl
