"""Slurm hostlists and topology.conf: the man page's rules, round trips, bad input."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.ib_dump_writer import fat_tree, write_dump
from canopy.cli import main
from canopy.engine import generate
from canopy.engine.io.hostlist import HostlistError, compress_hostlist, expand_hostlist
from canopy.engine.io.ib_fabric_import import import_ib_fabric
from canopy.engine.io.ibnetdiscover import parse_ibnetdiscover
from canopy.engine.io.slurm_topology import (
    SlurmTopologyError,
    export_slurm,
    logical_lines,
    parse_topology_conf,
    topology_from_slurm,
)
from canopy.engine.io.topology_json import load_topology, save_topology
from canopy.engine.model.topology import find_problems

# ------------------------------------------------------------------ hostlists


@pytest.mark.parametrize("text,names", [
    ("tux[0-3,12,18-20]", ["tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19",
                           "tux20"]),
    ("node[01-03]", ["node01", "node02", "node03"]),              # zero padding
    ("node[08-11]", ["node08", "node09", "node10", "node11"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("a,b c\tn[1-2]", ["a", "b", "c", "n1", "n2"]),              # separators
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),            # several bracket groups
    ("rack[1-2]_a", ["rack1_a", "rack2_a"]),                      # suffix
    ("s[0-2,4-8,12]", ["s0", "s1", "s2", "s4", "s5", "s6", "s7", "s8", "s12"]),
    ("n7", ["n7"]),
    ("n[5]", ["n5"]),
])
def test_expand(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text,fragment", [
    ("n[5-1]", "runs backwards"),
    ("n[1-", "never closes"),
    ("n]", "never opened"),
    ("n[]", "empty brackets"),
    ("n[a-b]", "neither a number"),
    ("n[-3]", "neither a number"),
    ("n[[1-2]]", "inside brackets"),
    ("n[0-99999999]", "more than"),
])
def test_bad_hostlists(text, fragment):
    with pytest.raises(HostlistError, match=fragment):
        expand_hostlist(text)


def test_compress():
    names = [f"node{i:02d}" for i in range(1, 17)] + ["node20", "login"]
    assert compress_hostlist(names) == "login,node[01-16,20]"
    assert compress_hostlist(["n9", "n10", "n11"]) == "n[9-11]"
    assert compress_hostlist(["n09", "n10", "n11"]) == "n[09-11]"
    with pytest.raises(HostlistError, match="cannot carry"):
        compress_hostlist(["bad name"])


@settings(max_examples=150, deadline=None)
@given(st.sets(st.tuples(st.sampled_from(["n", "gpu-", "rack1n", "x"]),
                         st.integers(0, 300), st.integers(0, 4)), min_size=1, max_size=60))
def test_compress_expand_round_trip(items):
    names = {f"{prefix}{str(n).zfill(width)}" for prefix, n, width in items}
    assert set(expand_hostlist(compress_hostlist(names))) == names
    assert len(expand_hostlist(compress_hostlist(names))) == len(names)


# ------------------------------------------------------------------ the file


MAN_TREE = """\
##################################################################
# Slurm's network topology configuration file for use with the
# topology/tree plugin
##################################################################
SwitchName=s0 Nodes=dev[0-5]
SwitchName=s1 Nodes=dev[6-11]
SwitchName=s2 Nodes=dev[12-17]
SwitchName=s3 Switches=s[0-2]
"""

MAN_BLOCK = """\
BlockName=block1 Nodes=node[1-32]
BlockName=block2 Nodes=node[33-64]
BlockName=block3 Nodes=node[65-96]
BlockName=block4 Nodes=node[97-128]
BlockSizes=30,120
"""


def test_man_page_examples():
    tree = parse_topology_conf(MAN_TREE)
    assert [s.name for s in tree.switches] == ["s0", "s1", "s2", "s3"]
    assert tree.switches[3].switches == ["s0", "s1", "s2"]
    assert tree.levels == {"s0": 0, "s1": 0, "s2": 0, "s3": 1}
    topo = topology_from_slurm(tree, [25, 100])
    assert len(topo.compute_nodes()) == 18 and find_problems(topo) == []
    assert {link.bandwidth for link in topo.links if link.target == "s3"} == {100}
    block = parse_topology_conf(MAN_BLOCK)
    assert block.plugin == "block" and block.block_sizes == [30, 120]
    assert [len(b.nodes) for b in block.blocks] == [32, 32, 32, 32]
    topo = topology_from_slurm(block, [50])
    assert len(topo.compute_nodes()) == 128 and find_problems(topo) == []


def test_lines_comments_continuations_escapes():
    text = ("SwitchName=s0 \\\n   Nodes=n[1-2] # a comment\n"
            "switchname=s1 nodes=n3 LINKSPEED=400\n"
            "SwitchName=top\\#1 Switches=s[0-1]   \n"
            "SwitchName=\"quoted\" Nodes=n4\n")
    assert logical_lines("a \\\nb\nc # d")[0] == (1, "a b")
    conf = parse_topology_conf(text)
    assert [s.name for s in conf.switches] == ["s0", "s1", "top#1", "quoted"]
    assert conf.switches[0].nodes == ["n1", "n2"]
    assert conf.switches[1].link_speed == 400


@pytest.mark.parametrize("text,fragment", [
    ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "form a cycle"),
    ("SwitchName=a Switches=a\n", "itself"),
    ("SwitchName=a Switches=zz\n", "no SwitchName line"),
    ("SwitchName=a Nodes=n1 Switches=b\nSwitchName=b Nodes=n2\n", "both Nodes and Switches"),
    ("SwitchName=a Nodes=n[5-1]\n", "runs backwards"),
    ("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", "already defined"),
    ("SwitchName=a Nodes=n1 Color=red\n", "not a SwitchName option"),
    ("SwitchName=a Nodes=n1 LinkSpeed=fast\n", "not a whole number"),
    ("Frobnicate=yes\n", "not a topology.conf key"),
    ("SwitchName=a Nodes=n1\nBlockName=b Nodes=n2\n", "mixes"),
    ("BlockName=b Nodes=n[1-4]\nBlockSizes=4,12\n", "power-of-two"),
    ("BlockName=b Nodes=n[1-2]\nBlockSizes=4\n", "fewer than the base"),
    ("# only a comment\n", "defines no"),
    ("SwitchName=" + "x" * 70 + " Nodes=n1\n", "1 to 64"),
    ("SwitchName=a Nodes=n1 garbage\n", "not a Key=Value"),
])
def test_bad_conf_one_sentence_exit_2(text, fragment, tmp_path, capsys):
    with pytest.raises(SlurmTopologyError, match=fragment):
        parse_topology_conf(text)
    path = tmp_path / "topology.conf"
    path.write_text(text)
    assert main(["import-slurm", str(path), "-o", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and err.count("\n") == 0 and "topology.conf, line" in err or \
        fragment in err and "defines no" in err


# ------------------------------------------------------------------ export and round trips


def _leaves_and_parents(text):
    conf = parse_topology_conf(text)
    return ({s.name: sorted(s.nodes) for s in conf.switches if s.nodes},
            {s.name: sorted(s.switches) for s in conf.switches if s.switches})


def test_export_generated_leaf_spine():
    topo = generate("cluster", {"servers": "8", "gpus": "4", "scale_out": "leaf-spine",
                                "servers_per_leaf": "2"})
    text = export_slurm(topo).text
    leaves, parents = _leaves_and_parents(text)
    assert leaves == {f"leaf{p}.0": [f"n{2 * p}", f"n{2 * p + 1}"] for p in range(4)}
    assert parents == {f"spine{k}": [f"leaf{p}.0" for p in range(4)] for k in range(2)}
    assert "stands also for leaf0.1, leaf0.2, leaf0.3" in text
    block = export_slurm(topo, "block").text
    assert "BlockName=block1 Nodes=n[0-1]" in block and "BlockSizes=2,4,8" in block


def test_export_import_export_round_trip(tmp_path):
    dump = fat_tree(40, hosts_per_leaf=10, spines=3, name="gpu{:02d}")
    topo = import_ib_fabric(parse_ibnetdiscover(write_dump(dump), "f.txt")).topology
    first = export_slurm(topo).text
    assert "SwitchName=leaf00-0 Nodes=gpu[00-09] LinkSpeed=400" in first
    assert "SwitchName=spine00 Switches=leaf[00-03]-0 LinkSpeed=400" in first
    back = topology_from_slurm(parse_topology_conf(first), [50])
    again = export_slurm(back).text
    assert _leaves_and_parents(again) == _leaves_and_parents(first)
    assert sorted(back.compute_nodes()) == sorted(f"gpu{i:02d}" for i in range(40))
    block = export_slurm(topo, "block").text
    conf = parse_topology_conf(block)
    assert [len(b.nodes) for b in conf.blocks] == [10] * 4 and conf.block_sizes == [10, 20, 40]
    assert export_slurm(topology_from_slurm(conf, [50]), "block").text.splitlines()[2:] == \
        block.splitlines()[2:]


def test_cli_round_trip(tmp_path, capsys):
    topo = generate("cluster", {"servers": "6", "gpus": "2", "scale_out": "single"})
    src = tmp_path / "c.json"
    save_topology(topo, src)
    conf = tmp_path / "topology.conf"
    assert main(["export-slurm", str(src), "-o", str(conf)]) == 0
    assert "SwitchName=ib Nodes=n[0-5]" in conf.read_text()
    out = tmp_path / "back.json"
    assert main(["import-slurm", str(conf), "-o", str(out), "--bw", "25,100"]) == 0
    back = load_topology(out)
    assert len(back.compute_nodes()) == 6 and {link.bandwidth for link in back.links} == {25}
    assert main(["import-slurm", str(conf), "-o", str(out), "--bw", "fast"]) == 2
    assert main(["export-slurm", str(src), "-o", str(conf), "--plugin", "block",
                 "--block-sizes", "6"]) == 0
    assert "BlockSizes=6" in conf.read_text()
    assert main(["export-slurm", str(src), "-o", str(conf), "--plugin", "block",
                 "--block-sizes", "4,12"]) == 2
    capsys.readouterr()


def test_export_without_switches_and_odd_names():
    ring = generate("ring", {"n": "4", "bandwidth": "50"})
    result = export_slurm(ring)
    assert "SwitchName=fabric Nodes=" in result.text and result.warnings
    assert len(parse_topology_conf(result.text).switches[0].nodes) == 4
