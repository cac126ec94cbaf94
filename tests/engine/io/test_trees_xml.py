"""``--trees-xml``: the trees of a schedule as XML for people."""

import pytest
from lxml import etree

from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.safe_xml import parse_xml_bytes, parse_xml_file
from canopy.engine.io.topology_json import load_sample
from canopy.engine.io.trees_xml import trees_xml, write_trees_xml
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.msccl import msccl_xml
from tests.engine.msccl.test_writer import star_schedule


@pytest.fixture(scope="module")
def a100():
    return solve(load_sample("dgx-a100-2x8"))


def test_listing_has_every_tree_and_send(a100):
    top = parse_xml_bytes(trees_xml(a100), "trees")
    n, k = len(a100.compute_nodes), a100.k
    assert (top.tag, top.get("collective"), top.get("ngpus"), top.get("k"),
            top.get("nchunksperloop")) == ("trees", "allgather", str(n), str(k), str(n * k))
    trees = top.findall("tree")
    assert len(trees) == len(a100.trees)
    by_key = {(t.root, t.index): t for t in a100.trees}
    for elem in trees:
        tree = by_key[(elem.get("root"), int(elem.get("index")))]
        assert list(elem.attrib) == ["root", "rank", "index", "nchunks", "first_chunk",
                                     "height", "phases"]
        assert elem.get("rank") == str(a100.compute_nodes.index(tree.root))
        assert elem.get("nchunks") == str(tree.multiplicity)
        assert elem.get("height") == str(tree.height)
        assert elem.get("phases") == "allgather"
        sends = elem.findall("send")
        assert len(sends) == n - 1
        assert [(s.get("src"), s.get("dst"), s.get("path").split(" ")) for s in sends] == \
            [(e.src, e.dst, list(e.path)) for e in tree.edges]


def test_first_chunks_partition_each_roots_range_as_in_the_msccl_xml(a100):
    top = etree.fromstring(trees_xml(a100))
    k = a100.k
    for rank in range(len(a100.compute_nodes)):
        mine = sorted((int(t.get("first_chunk")), int(t.get("nchunks")))
                      for t in top.findall("tree") if t.get("rank") == str(rank))
        starts = [rank * k]
        for first, count in mine:
            assert first == starts[-1]
            starts.append(first + count)
        assert starts[-1] == (rank + 1) * k
    # the chunks of a root's first tree leave the root in the MSCCL program
    algo = etree.fromstring(msccl_xml(a100))
    first = top.find("tree")
    root_gpu = algo.find(f"gpu[@id='{first.get('rank')}']")
    sent = {int(s.get("srcoff")) for s in root_gpu.iter("step") if s.get("type") == "s"}
    assert int(first.get("first_chunk")) in sent


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_phases_follow_the_collective(collective):
    phases = {t.get("phases") for t in etree.fromstring(
        trees_xml(star_schedule(collective))).findall("tree")}
    assert phases == {{"allgather": "allgather", "reduce-scatter": "reduce-scatter",
                       "allreduce": "reduce-scatter allgather"}[collective]}


def test_separate_reduce_trees_are_listed_too():
    schedule = star_schedule("allreduce", reduce_differently=True)
    trees = etree.fromstring(trees_xml(schedule)).findall("tree")
    assert len(trees) == len(schedule.trees) + len(schedule.reduce_trees)
    assert [t.get("phases") for t in trees].count("reduce-scatter") == \
        len(schedule.reduce_trees)
    assert {t.get("nchunks") for t in trees if t.get("phases") == "reduce-scatter"} == \
        {"1", "2"}


def test_written_atomically_and_well_formed(tmp_path, a100):
    path = tmp_path / "t.xml"
    write_trees_xml(path, a100)
    assert path.read_bytes().startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    assert parse_xml_file(path).tag == "trees"
    assert [p.name for p in tmp_path.iterdir()] == ["t.xml"]
