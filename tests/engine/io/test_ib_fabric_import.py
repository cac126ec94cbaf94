"""InfiniBand fabric dumps (ibnetdiscover format) written by bench/ib_dump_writer.py: import,
rates, hosts, SHARP nodes, down and unknown ports, defects and their cost, bad input."""

import re
from fractions import Fraction

import pytest

from bench.ib_dump_writer import fat_tree, recable, remove_node, write_dump
from canopy.cli import main
from canopy.engine import generate, optimum
from canopy.engine.fabric.defects import (
    FEW_ADAPTERS,
    FEW_UPLINKS,
    SLOW_LINK,
    WRONG_SWITCH,
    find_defects,
)
from canopy.engine.io.ib_fabric_import import (
    host_and_device,
    import_ib_fabric,
    import_ib_file,
    switch_name,
)
from canopy.engine.io.ibnetdiscover import (
    LANE_GBPS,
    IbDumpError,
    link_bandwidth,
    parse_ibnetdiscover,
)
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.topology import find_problems
from tests import DATA

HOST_XML = DATA / "nccl-dgx-a100-dump.xml"


def imported(dump, dialect="tab"):
    return import_ib_fabric(parse_ibnetdiscover(write_dump(dump, dialect), "fabric.txt"))


def test_rates_after_line_encoding():
    assert link_bandwidth("4x", "NDR") == 50          # 400 Gb/s
    assert link_bandwidth("4x", "HDR") == 25          # 200 Gb/s
    assert link_bandwidth("4x", "EDR") == Fraction(25, 2)
    assert link_bandwidth("4x", "FDR") == Fraction(75, 11)   # 14.0625 x 64/66 x 4 / 8
    assert link_bandwidth("4x", "FDR10") == 5
    assert link_bandwidth("4x", "QDR") == 4           # 10 x 8/10 x 4 / 8
    assert link_bandwidth("1x", "SDR") == Fraction(1, 4)
    assert link_bandwidth("12x", "XDR") == 300
    assert link_bandwidth("2x", "NDR") == 25
    assert set(LANE_GBPS) == {"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"}


@pytest.mark.parametrize("hosts,rails,per_leaf,spines", [(2, 1, 2, 1), (8, 2, 4, 2),
                                                         (24, 4, 8, 3), (64, 1, 16, 4)])
@pytest.mark.parametrize("dialect", ["tab", "space"])
def test_fat_trees_import_whole(hosts, rails, per_leaf, spines, dialect):
    dump = fat_tree(hosts, rails=rails, hosts_per_leaf=per_leaf, spines=spines)
    result = imported(dump, dialect)
    topo = result.topology
    pods = -(-hosts // per_leaf)
    assert len(result.hosts) == hosts
    assert len(topo.compute_nodes()) == hosts
    assert len(result.tiers) == spines + pods * rails
    cables = hosts * rails + pods * rails * spines
    assert topo.extra["imported_from"]["cables"] == cables
    assert len(topo.links) == hosts * rails + cables          # host-adapter links + cables
    assert find_problems(topo) == []
    assert all(n.x is not None for n in topo.nodes)
    spine = topo.node("spine00")
    leaf = topo.node("leaf00-0")
    assert spine.y < leaf.y < topo.node("node000").y          # spines over leaves over hosts
    assert spine.extra["guid"].startswith("0x") and leaf.extra["tier"] == 1
    assert result.reports == [] and result.warnings == []
    assert find_defects(result, cost=False) == []


@pytest.mark.parametrize("speed", sorted(LANE_GBPS))
def test_each_speed(speed):
    dump = fat_tree(4, hosts_per_leaf=2, spines=1, host_rate=f"4x{speed}",
                    up_rate=f"4x{speed}")
    topo = imported(dump).topology
    rates = {link.extra["rate"] for link in topo.links if "rate" in link.extra}
    assert rates == {f"4x{speed}"}
    assert {link.bandwidth for link in topo.links} == {link_bandwidth("4x", speed)}


def test_same_optimum_as_the_generated_cluster():
    dump = fat_tree(40, hosts_per_leaf=8, spines=5)
    topo = imported(dump).topology
    twin = generate("cluster", {"servers": "40", "gpus": "1", "nics_per_gpu": "1",
                                "scale_out": "leaf-spine", "leaf": "tor",
                                "servers_per_leaf": "8", "spines": "5",
                                "oversubscription": "8/5", "nic_bw": "50"})
    assert optimum(topo).x == optimum(twin).x


def test_parallel_cables_summed():
    dump = fat_tree(4, hosts_per_leaf=2, spines=1, uplinks=3)
    topo = imported(dump).topology
    up = [link for link in topo.links if link.target == "spine00"]
    assert len(up) == 2 and all(link.bandwidth == 150 and link.extra["cables"] == 3
                                for link in up)


def test_hosts_by_description_and_sharp_left_out():
    assert host_and_device("a08-p1-dgx-04-c01 mlx5_5") == ("a08-p1-dgx-04-c01", "mlx5_5")
    assert host_and_device("MT4123 ConnectX6   Mellanox Technologies") is None
    assert switch_name("MF0;leaf01:MQM9700/U1") == "leaf01"
    dump = fat_tree(4, rails=2, hosts_per_leaf=2, spines=1, sharp=True,
                    name="a08-p1-dgx-{:02d}-c01")
    result = imported(dump)
    assert list(result.hosts) == [f"a08-p1-dgx-{i:02d}-c01" for i in range(4)]
    assert len(result.aggregation_nodes) == 5
    assert "Aggregation" not in " ".join(result.topology.node_ids())
    assert result.topology.node("a08-p1-dgx-00-c01.mlx5_1").group == "a08-p1-dgx-00-c01"


def test_down_and_unknown_ports_reported():
    dump = fat_tree(4, hosts_per_leaf=2, spines=1)
    dump.nodes[dump.adapters[("node001", 0)]].ports = 2         # port 2 down
    dump.set_rate(dump.adapters[("node002", 0)], dump.leaves[(1, 0)], "??????")
    result = imported(dump)
    text = " ".join(result.reports)
    assert "'node001 mlx5_0' port 2" in text and "down" in text
    assert "unknown rate" in text
    failed = [link for link in result.topology.links if link.failed]
    assert [link.source for link in failed] == ["node002.mlx5_0"]


def test_defects_found_and_costed():
    dump = fat_tree(32, rails=4, hosts_per_leaf=8, spines=4)
    dump.set_rate(dump.adapters[("node003", 1)], dump.leaves[(0, 1)], "4xHDR")
    dump.set_rate(dump.leaves[(1, 2)], dump.spines[3], "2xNDR")
    port, _ = dump.cable(dump.leaves[(2, 0)], dump.spines[1])
    dump.disconnect(dump.leaves[(2, 0)], port)
    remove_node(dump, dump.adapters[("node017", 3)])
    recable(dump, dump.adapters[("node025", 2)], dump.leaves[(3, 2)], dump.leaves[(3, 1)])
    defects = find_defects(imported(dump))
    kinds = sorted(d.kind for d in defects)
    assert kinds == sorted([SLOW_LINK, SLOW_LINK, FEW_UPLINKS, FEW_ADAPTERS, WRONG_SWITCH])
    by_kind = {d.kind: d for d in defects}
    slow_host = next(d for d in defects if d.kind == SLOW_LINK and "node003" in d.message)
    assert "4xHDR" in slow_host.message and "slower" in slow_host.message
    assert slow_host.with_defect < slow_host.repaired          # one adapter at half speed
    narrow = next(d for d in defects if d.kind == SLOW_LINK and "2xNDR" in d.message)
    assert "narrower" in narrow.message
    assert "leaf02-0 has 15 uplinks" not in by_kind[FEW_UPLINKS].message
    assert "leaf02-0 has 3 uplinks" in by_kind[FEW_UPLINKS].message
    assert "spine01" in by_kind[FEW_UPLINKS].message
    few = by_kind[FEW_ADAPTERS]
    assert "node017" in few.message and "mlx5_3" in few.message
    assert few.repaired / few.with_defect == Fraction(4, 3)
    wrong = by_kind[WRONG_SWITCH]
    assert "node025 mlx5_2" in wrong.message and "leaf03-2" in wrong.message
    assert all(d.line().count("\n") == 0 for d in defects)


def test_wrong_pod_cable():
    dump = fat_tree(16, rails=2, hosts_per_leaf=8, spines=2)
    recable(dump, dump.adapters[("node005", 1)], dump.leaves[(0, 1)], dump.leaves[(1, 1)])
    defects = find_defects(imported(dump), cost=False)
    assert [d.kind for d in defects] == [WRONG_SWITCH]
    assert "node005 mlx5_1" in defects[0].message and "leaf00-1" in defects[0].message


def test_tor_wrong_switch():
    dump = fat_tree(8, rails=1, hosts_per_leaf=4, spines=1)
    # two adapters per host, both on the host's top-of-rack leaf
    for host in dump.hosts:
        first = dump.adapters[(host, 0)]
        leaf = dump.nodes[first].links[1][0]
        guid = first + 1
        from bench.ib_dump_writer import DumpNode
        dump.nodes[guid] = DumpNode(guid, "Ca", 1, f"{host} mlx5_1", 900 + guid % 100)
        dump.connect(guid, 1, leaf, dump.free_port(leaf), "4xNDR")
        dump.adapters[(host, 1)] = guid
    recable(dump, dump.adapters[("node002", 1)], dump.leaves[(0, 0)], dump.leaves[(1, 0)])
    defects = find_defects(imported(dump), cost=False)
    assert any(d.kind == WRONG_SWITCH and "node002 mlx5_1" in d.message for d in defects)


def test_host_topology_fills_every_host(tmp_path):
    dump = fat_tree(4, rails=8, hosts_per_leaf=2, spines=2)
    path = tmp_path / "fabric.txt"
    path.write_text(write_dump(dump))
    result = import_ib_file(path, HOST_XML)
    topo = result.topology
    assert len(topo.compute_nodes()) == 32
    assert find_problems(topo) == []
    nic = topo.node("node000.mlx5_3")                 # NCCL NIC matched by device name
    assert nic.group == "node000" and nic.extra["guid"].startswith("0x")
    assert any(link.source == "node000.mlx5_3" and link.target == "leaf00-3"
               for link in topo.links)
    assert any("node000.gpu" in link.source and "node000" in link.target
               for link in topo.links)
    assert optimum(topo).x > 0


def test_cli_import_ib(tmp_path, capsys):
    dump = fat_tree(8, rails=2, hosts_per_leaf=4, spines=2)
    remove_node(dump, dump.adapters[("node006", 0)])
    path = tmp_path / "fabric.txt"
    path.write_text(write_dump(dump, "space"))
    out = tmp_path / "cluster.json"
    assert main(["import-ib", str(path), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "8 hosts, 15 adapters, 6 switches (4 leaf, 2 spine)" in text
    assert "few adapters: host node006" in text and "repaired" in text
    topo = load_topology(out)
    assert topo.node("leaf00-0").extra["guid"].startswith("0x")
    assert topo.links[-1].extra["rate"] == "4xNDR"


GOOD = write_dump(fat_tree(4, hosts_per_leaf=2, spines=1))


def _bad_cases():
    lines = GOOD.splitlines()
    port_line = next(i for i, line in enumerate(lines) if line.startswith("[1]"))
    return {
        "truncated-mid-line": (GOOD[:GOOD.rindex("[1]") + 8], "cut short"),
        "truncated-record": ("\n".join(lines[:-3]) + "\n", "cut short"),
        "truncated-last-ports": ("\n".join(lines[:-2]) + "\n", "cut short"),
        "truncated-header": (GOOD + "vendid=0x2c9\ndevid=0x1021\n", "cut short"),
        "truncated-missing-node": ("\n".join(lines[:len(lines) // 2]) + "\n", "truncated"),
        "port-without-node": (lines[port_line] + "\n" + GOOD, "before any Switch"),
        "unknown-speed": (GOOD.replace("4xNDR", "4xZDR", 1), "speed 'ZDR'"),
        "unknown-width": (GOOD.replace("4xNDR", "3xNDR", 1), "width '3x'"),
        "empty": ("# nothing\n", "lists no Switch"),
        "duplicate-node": (GOOD + "\n".join(lines[5:11]) + "\n", "second time"),
        "huge-port-count": (re.sub(r"^Ca\s+1\b", "Ca\t" + "1" + "0" * 200, GOOD, count=1,
                                   flags=re.M), "at most 255"),
    }


@pytest.mark.parametrize("name", sorted(_bad_cases()))
def test_bad_dump_one_sentence_exit_2(name, tmp_path, capsys):
    text, fragment = _bad_cases()[name]
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    assert main(["import-ib", str(path), "-o", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err, err
    assert err.count("\n") == 0 and "Traceback" not in err
    with pytest.raises(IbDumpError):
        parse_ibnetdiscover(text, name)


def test_grouped_and_full_output_accepted():
    text = GOOD.replace("[1]\t", "[1][ext 7]\t", 1).replace(" 4xNDR\n", " 4xNDR s=64 w=2 v=3\n")
    text = "Chassis 1 (guid 0x1)\n\nNon-Chassis Nodes\n" + text
    result = import_ib_fabric(parse_ibnetdiscover(text, "grouped.txt"))
    assert len(result.hosts) == 4 and result.warnings == []


def test_missing_uplink_costs_on_an_oversubscribed_fabric():
    # 8 hosts of 50 GB/s per leaf, 2 x 12.5 GB/s up: the leaf's cut binds the allgather
    dump = fat_tree(32, hosts_per_leaf=8, spines=2, up_rate="1xNDR")
    port, _ = dump.cable(dump.leaves[(1, 0)], dump.spines[0])
    dump.disconnect(dump.leaves[(1, 0)], port)
    defects = find_defects(imported(dump))
    assert [d.kind for d in defects] == [FEW_UPLINKS]
    assert "leaf01-0 has 1 uplinks where" in defects[0].message
    assert defects[0].repaired == 2 * defects[0].with_defect   # the cut halves
    assert len(defects[0].hosts) == 16


def test_single_adapter_host_on_the_wrong_leaf():
    dump = fat_tree(120, hosts_per_leaf=20, spines=2)
    recable(dump, dump.adapters[("node027", 0)], dump.leaves[(1, 0)], dump.leaves[(2, 0)])
    defects = find_defects(imported(dump), cost=False)
    assert [d.kind for d in defects] == [WRONG_SWITCH]
    assert "node027 mlx5_0 is cabled to leaf02-0" in defects[0].message
    assert "belongs on leaf01-0" in defects[0].message
