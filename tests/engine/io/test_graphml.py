"""GraphML import/export: exact round trips of every sample, GraphML from other tools,
bad input, and hostile XML."""

import time
from fractions import Fraction

import networkx as nx
import pytest

from canopy.cli import main
from canopy.engine.io.graphml import dumps_graphml, load_graphml, loads_graphml, save_graphml
from canopy.engine.io.topology_json import (
    load_sample,
    load_topology,
    sample_names,
    topology_to_dict,
)
from canopy.engine.model.errors import CanopyError, TopologyError
from canopy.engine.model.topology import Link, Node, Topology


def billion_laughs(body):
    """A document whose entity lol9 would expand to 10^9 'lol's, used inside ``body``."""
    decls, prev = ['<!ENTITY lol "lol">'], "lol"
    for i in range(2, 10):
        decls.append(f'<!ENTITY lol{i} "{("&" + prev + ";") * 10}">')
        prev = f"lol{i}"
    return ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n' + "\n".join(decls) + "\n]>\n"
            + body).encode()


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_round_trips_exactly(name, tmp_path):
    topo = load_sample(name)
    path = tmp_path / "t.graphml"
    save_graphml(topo, path)
    back = load_graphml(path)
    assert topology_to_dict(back) == topology_to_dict(topo)   # nested keys too, as JSON


def test_exact_bandwidths_latency_one_way_links_and_extras_survive():
    topo = Topology("odd numbers", [
        Node("a", "compute", "A", "g1", 1.5, -2.0, {"vendor": "x", "rank": 3}),
        Node("b", "compute", "B", None, None, None),
        Node("s", "switch", "S", "g1", 0.0, 0.0)],
        [Link("a", "s", Fraction(1, 3), True, Fraction("0.5"), {"cable": "copper"}),
         Link("b", "s", Fraction("12.5"), False),
         Link("s", "b", Fraction("12.5"), False),
         Link("a", "s", Fraction(7), True)],
        extra={"owner": "lab"})
    back = loads_graphml(dumps_graphml(topo), "odd.graphml")
    assert topology_to_dict(back) == topology_to_dict(topo)


def test_list_valued_link_ports_round_trip(tmp_path):
    """An imported InfiniBand link keeps its cables' ``ports`` (a list of port pairs)
    through a GraphML export and import, and so do list- and object-valued keys of
    nodes and of the graph; a key that is a list on one link and a string on another
    comes back as each was."""
    topo = Topology("ib", [
        Node("h1", "compute", extra={"hcas": ["mlx5_0", "mlx5_1"]}),
        Node("h2", "compute"), Node("sw", "switch")],
        [Link("h1", "sw", Fraction(50), extra={"rate": "4X HDR", "cables": 2,
                                               "ports": [[1, 7], [2, 8]]}),
         Link("h2", "sw", Fraction(25), extra={"ports": "unknown"}),
         Link("h2", "sw", Fraction(25))],
        extra={"imported_from": {"tool": "ibnetdiscover", "hosts": 2}})
    path = tmp_path / "ib.graphml"
    save_graphml(topo, path)
    back = load_graphml(path)
    assert back.links[0].extra["ports"] == [[1, 7], [2, 8]]
    assert back.links[1].extra["ports"] == "unknown" and "ports" not in back.links[2].extra
    assert topology_to_dict(back) == topology_to_dict(topo)


@pytest.mark.parametrize("keys, ports, words", [
    ('{"link": ["ports"]}', "[[1, 7],", "'ports' on the edge a - b is not the JSON text"),
    ('["ports"]', "[]", "canopy_json_keys' is not an object of key lists"),
])
def test_bad_json_valued_keys_are_one_sentence(keys, ports, words):
    g = nx.MultiDiGraph(canopy_json_keys=keys)
    g.add_edge("a", "b", bandwidth="1", ports=ports)
    with pytest.raises(TopologyError, match=words):
        loads_graphml("\n".join(nx.generate_graphml(g)).encode(), "t.graphml")


def test_graphml_from_another_tool():
    g = nx.Graph(name="from networkx")
    g.add_edge("u", "v", capacity=2.5)
    g.add_edge("v", "w", bandwidth="10")
    g.add_node("w", kind="switch", x=3, y=4)
    topo = loads_graphml("\n".join(nx.generate_graphml(g)).encode(), "other.graphml")
    assert topo.name == "from networkx"
    assert {n.id: n.kind for n in topo.nodes} == {"u": "compute", "v": "compute",
                                                  "w": "switch"}
    assert all(link.duplex for link in topo.links)
    assert sorted(link.bandwidth for link in topo.links) == [Fraction(5, 2), Fraction(10)]
    assert (topo.node("w").x, topo.node("w").y) == (3.0, 4.0)


@pytest.mark.parametrize("xml, words", [
    (b"<graphml><graph edgedefault='directed'><node id='a'/><node id='b'/>"
     b"<edge source='a' target='b'/></graph></graphml>", "no 'bandwidth'"),
    (b"<graphml><graph><node id='a'/>", "not well-formed"),
    (b"<graphml xmlns='http://graphml.graphdrawing.org/xmlns'><key id='d0' for='edge' "
     b"attr.name='bandwidth' attr.type='string'/><graph edgedefault='directed'>"
     b"<node id='a'/><node id='b'/><edge source='a' target='b'><data key='d0'>fast</data>"
     b"</edge></graph></graphml>", "bandwidth 'fast'"),
    (b"<graphml><graph><hyperedge/></graph></graphml>", "GraphML that Canopy can read"),
    (b'<?xml version="1.0"?>\n<!DOCTYPE graphml SYSTEM "file:///etc/hostname">\n'
     b"<graphml><graph><node id='a'/><desc>&ent;</desc></graph></graphml>", "entities"),
])
def test_bad_graphml_is_one_sentence(xml, words):
    with pytest.raises(CanopyError, match=words) as info:
        loads_graphml(xml, "bad.graphml")
    assert "bad.graphml" in str(info.value)


def test_billion_laughs_is_refused_quickly(tmp_path):
    path = tmp_path / "laughs.graphml"
    path.write_bytes(billion_laughs('<graphml><graph><node id="&lol9;"/></graph></graphml>'))
    start = time.perf_counter()
    with pytest.raises(CanopyError, match="entities"):
        load_graphml(path)
    assert time.perf_counter() - start < 2


def test_external_entity_is_refused_and_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    path = tmp_path / "xxe.graphml"
    path.write_bytes(f'<?xml version="1.0"?>\n<!DOCTYPE graphml [ <!ENTITY xxe SYSTEM '
                     f'"file://{secret}"> ]>\n<graphml><graph><node id="&xxe;"/></graph>'
                     "</graphml>\n".encode())
    with pytest.raises(CanopyError) as info:
        load_graphml(path)
    assert "TOP-SECRET-VALUE" not in str(info.value)


def test_missing_file():
    with pytest.raises(CanopyError, match="no such file"):
        load_graphml("/nonexistent/x.graphml")


def test_cli_export_then_import(tmp_path, capsys):
    src = tmp_path / "in.json"
    assert main(["samples", "mi250-8plus8", "-o", str(src)]) == 0
    assert main(["export-graphml", str(src), "-o", str(tmp_path / "t.graphml")]) == 0
    assert main(["import-graphml", str(tmp_path / "t.graphml"), "-o",
                 str(tmp_path / "out.json")]) == 0
    assert topology_to_dict(load_topology(tmp_path / "out.json")) == \
        topology_to_dict(load_topology(src))
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml>")
    assert main(["import-graphml", str(bad), "-o", str(tmp_path / "x.json")]) == 2
    assert "bad.graphml" in capsys.readouterr().err


def test_topology_error_is_a_canopy_error():
    assert issubclass(TopologyError, CanopyError)
