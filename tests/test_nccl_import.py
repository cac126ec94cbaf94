"""NCCL topology import: real provider files, hand-made dumps with NVLink/NVSwitch, odd
elements, hosts and scale-out, and safety against hostile XML."""

import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from canopy.cli import main
from canopy.engine.errors import CanopyError
from canopy.engine.forest import solve
from canopy.engine.nccl_import import (
    DEFAULT_PCIE_BW,
    NcclImportError,
    NcclImportOptions,
    import_nccl_bytes,
    import_nccl_file,
    pcie_bandwidth,
)
from canopy.engine.network import Network
from canopy.engine.optimality import find_optimum
from canopy.engine.topology import find_problems
from canopy.engine.topology_io import load_topology

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nccl-topo"
REAL_FILES = sorted(SHARED.glob("*.xml")) if SHARED.is_dir() else []
GEN3_X16 = Fraction(1024, 65)          # 8 GT/s x 16 lanes x 128/130 / 8 = 15.75 GB/s
GEN4_X16 = Fraction(2048, 65)
GEN5_X16 = Fraction(4096, 65)


def links_between(topo, a, b):
    return [link.bandwidth for link in topo.links if {link.source, link.target} == {a, b}]


def kinds(topo, role):
    return [n for n in topo.node_ids() if n.split(".")[-1].rstrip("0123456789") == role]


@pytest.mark.parametrize("speed, lanes, expected", [
    (Fraction("2.5"), 1, Fraction(1, 4)),          # Gen1: 8b/10b
    (Fraction(5), 16, Fraction(8)),                # Gen2: 8b/10b
    (Fraction(8), 16, GEN3_X16),                   # Gen3: 128b/130b
    (Fraction(16), 16, GEN4_X16),
    (Fraction(32), 8, GEN4_X16),
])
def test_pcie_bandwidth_encoding(speed, lanes, expected):
    assert pcie_bandwidth(speed, lanes) == expected


# ------------------------------------------------------------------ the provider files


def test_the_shared_files_are_there():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not present beside this checkout")
    assert len(REAL_FILES) >= 7


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("hosts", [1, 3])
def test_every_real_file_imports_or_says_why(path, hosts):
    options = NcclImportOptions(hosts=hosts, nvswitch_bw=Fraction(300))
    if path.name.startswith("aws-g5"):
        # That static file lists only PCI switch bus ids, to be merged with a live system.
        with pytest.raises(NcclImportError, match="no GPU"):
            import_nccl_file(path, options)
        return
    result = import_nccl_file(path, options)
    topo = result.topology
    assert find_problems(topo) == []
    per_host = 4 if "ncv4" in path.name else 8
    assert len(topo.compute_nodes()) == per_host * hosts
    assert all(n.x is not None and n.y is not None for n in topo.nodes)
    assert len({(n.x, n.y) for n in topo.nodes}) == len(topo.nodes)
    assert {n.group for n in topo.nodes if n.kind == "compute"} == {f"h{h}" for h in range(hosts)}
    assert find_optimum(Network.from_topology(topo)).algbw() > 0
    for warning in result.warnings:
        assert warning.startswith(str(path)) and warning.endswith(".")


def _real(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return path


def test_p4d_pcie_tree_and_nic_defaults():
    result = import_nccl_file(_real("aws-p4d-24xl-topo.xml"), NcclImportOptions(nic_bw=12.5))
    topo = result.topology
    assert len(kinds(topo, "cpu")) == 2 and len(kinds(topo, "pcie")) == 4
    assert len(kinds(topo, "nic")) == 4
    assert links_between(topo, "h0.gpu0", "h0.pcie0") == [GEN3_X16]
    assert links_between(topo, "h0.pcie0", "h0.cpu0") == [GEN3_X16]
    assert links_between(topo, "h0.cpu0", "h0.cpu1") == [Fraction(10)]     # Intel sockets
    assert len(result.warnings) == 4
    assert all("no <net speed>" in w and "12.5 GB/s" in w for w in result.warnings)
    assert "line 20" in result.warnings[0] and "0000:10:1b.0" in result.warnings[0]
    # Without NVLink the GPUs only meet over PCIe, and one GPU's Gen3 link is the bottleneck
    # (7/15.75 beats the 4 GPUs behind each 10 GB/s socket link, 4/10).
    assert find_optimum(Network.from_topology(topo)).inverse_x == 7 / GEN3_X16


def test_p4d_two_hosts_on_rails():
    options = NcclImportOptions(hosts=2, nvswitch_bw=Fraction(300), nic_bw=Fraction("12.5"))
    topo = import_nccl_file(_real("aws-p4d-24xl-topo.xml"), options).topology
    assert sorted(n for n in topo.node_ids() if n.startswith("rail")) == [
        "rail0", "rail1", "rail2", "rail3"]
    assert links_between(topo, "h1.nic2", "rail2") == [Fraction("12.5")]
    assert links_between(topo, "h0.gpu5", "h0.nvswitch0") == [Fraction(300)]
    # One host's 4 NICs of 12.5 GB/s feed its 8 GPUs: 1/x* = 8/50.
    assert find_optimum(Network.from_topology(topo)).inverse_x == Fraction(8, 50)
    assert topo.extra["imported_from"]["hosts"] == 2


def test_single_network_switch_and_direct_nvlink_option():
    options = NcclImportOptions(hosts=2, net="single", nvlink_bw=Fraction(50))
    topo = import_nccl_file(_real("azure-ndv4-topo.xml"), options).topology
    assert "net" in topo.node_ids() and not any(n.startswith("rail") for n in topo.node_ids())
    assert sum(1 for link in topo.links if link.target == "net") == 16
    gpus = kinds(topo, "gpu")
    assert len(gpus) == 16
    assert links_between(topo, "h0.gpu0", "h0.gpu7") == [Fraction(50)]
    assert links_between(topo, "h0.gpu0", "h1.gpu0") == []


def test_ndv5_gen5_links_and_infiniband_class():
    topo = import_nccl_file(_real("azure-ndv5-topo.xml")).topology
    assert links_between(topo, "h0.gpu0", "h0.pcie0") == [GEN5_X16]
    assert len(kinds(topo, "nic")) == 8                      # class 0x0207: InfiniBand


def test_ncv4_self_nvlink_missing_speed_and_cpu_nic():
    result = import_nccl_file(_real("azure-ncv4-topo.xml"))
    topo = result.topology
    self_links = [w for w in result.warnings if "its own bus id" in w]
    missing = [w for w in result.warnings if "no usable link_speed" in w]
    assert len(self_links) == 4 and len(missing) == 4 and len(result.warnings) == 8
    assert "<nvlink target=\"0001:00:00.0\">" in self_links[0]
    assert links_between(topo, "h0.gpu0", "h0.cpu0") == [DEFAULT_PCIE_BW]
    assert links_between(topo, "h0.nic0", "h0.cpu0") == [Fraction("12.5")]  # 100000 Mb/s
    assert "eth0" in topo.node("h0.nic0").label
    assert links_between(topo, "h0.cpu0", "h0.cpu3") == [Fraction(16)]      # AMD sockets


# ------------------------------------------------------------------ hand-made dumps


def test_dump_with_nvswitches():
    result = import_nccl_file(DATA / "nccl-dgx-a100-dump.xml", NcclImportOptions(hosts=2))
    topo = result.topology
    assert result.warnings == []
    assert len(topo.compute_nodes()) == 16
    switches = [n for n in topo.node_ids() if ".nvswitch" in n]
    assert len(switches) == 12
    assert topo.node("h0.nvswitch0").extra["busid"] == "0000:c4:00.0"
    for s in range(6):
        assert links_between(topo, "h0.gpu3", f"h0.nvswitch{s}") == [Fraction(50)]  # 2 x 25
    assert links_between(topo, "h1.nic7", "rail7") == [Fraction(25)]            # 200 Gb/s
    assert links_between(topo, "h0.nic0", "h0.pcie0") == [GEN4_X16]
    opt = find_optimum(Network.from_topology(topo))
    # A GPU's ingress (6 x 50 NVLink + its PCIe Gen4 x16 link) is the bottleneck.
    assert opt.inverse_x == 15 / (300 + GEN4_X16)


def test_dump_with_direct_nvlinks_and_a_classless_gpu():
    result = import_nccl_file(DATA / "nccl-dgx1-v100-dump.xml")
    topo = result.topology
    assert result.warnings == []
    assert len(topo.compute_nodes()) == 8                    # GPU 7's <pci> has no class
    nvlink = Counter()
    for link in topo.links:
        if ".gpu" in link.source and ".gpu" in link.target:
            nvlink[link.source] += link.bandwidth
            nvlink[link.target] += link.bandwidth
    assert set(nvlink.values()) == {Fraction(150)}           # 6 NVLink2 links of 25 GB/s
    assert links_between(topo, "h0.gpu0", "h0.gpu3") == [Fraction(50)]
    assert links_between(topo, "h0.gpu0", "h0.gpu1") == [Fraction(25)]
    opts = NcclImportOptions(hosts=2, nvswitch_bw=Fraction(300))
    two = import_nccl_file(DATA / "nccl-dgx1-v100-dump.xml", opts)
    assert any("describes NVLink itself" in w for w in two.warnings)
    assert not any(".nvswitch" in n for n in two.topology.node_ids())
    # Two hosts: each host's 4 EDR NICs (12.5 GB/s) feed its 8 GPUs.
    assert find_optimum(Network.from_topology(two.topology)).inverse_x == Fraction(8, 50)


@pytest.mark.parametrize("dump", ["nccl-dgx-a100-dump.xml", "nccl-dgx1-v100-dump.xml",
                                  "nccl-odd-dump.xml"])
@pytest.mark.parametrize("hosts", [1, 2])
def test_imported_dumps_solve(dump, hosts):
    topo = import_nccl_file(DATA / dump, NcclImportOptions(hosts=hosts)).topology
    schedule = solve(topo)
    assert schedule.algbw == find_optimum(Network.from_topology(topo)).algbw()


ODD_WARNINGS = [
    ("line 8", "own bus id"),
    ("line 10", "not a GPU in this file"),
    ("line 11", "neither a GPU nor an NVSwitch"),
    ("line 12", "count 'abc'"),
    ("line 15", "no usable link_speed"),
    ("line 20", "class 0x010802"),
    ("line 21", "no busid"),
    ("line 23", "no <net speed>"),
    ("line 24", "no usable speed"),
    ("line 27", "has no class"),
    ("line 30", "sm '999'"),
    ("line 34", "<widget"),
    ("line 36", "<interconnect>"),
    ("nccl-odd-dump.xml:", "listed as 100 and 50 GB/s"),
]


def test_odd_elements_each_give_one_warning_and_the_rest_imports():
    result = import_nccl_file(DATA / "nccl-odd-dump.xml")
    assert len(result.warnings) == len(ODD_WARNINGS)
    for where, what in ODD_WARNINGS:
        assert sum(1 for w in result.warnings if where in w and what in w) == 1, (where, what)
    topo = result.topology
    assert find_problems(topo) == []
    assert len(topo.compute_nodes()) == 3
    assert links_between(topo, "h0.gpu0", "h0.gpu1") == [Fraction(50)]   # smaller end wins
    assert links_between(topo, "h0.gpu0", "h0.gpu2") == [Fraction(25)]
    assert links_between(topo, "h0.gpu1", "h0.pcie0") == [GEN4_X16]       # parent's speed


@pytest.mark.parametrize("xml, words", [
    (b"<notsystem/>", "not <system>"),
    (b"<system><cpu/></system>", "no GPU"),
    (b"<system><cpu>", "not well-formed"),
    (b"", "not well-formed"),
])
def test_unusable_files_raise_one_sentence(xml, words):
    with pytest.raises(CanopyError, match=words):
        import_nccl_bytes(xml, "dump.xml")


def test_hosts_need_nics_and_option_conflicts():
    path = DATA / "nccl-odd-dump.xml"
    no_nic = b'<system><cpu><pci busid="0000:01:00.0" class="0x030000"/></cpu></system>'
    with pytest.raises(NcclImportError, match="no NIC"):
        import_nccl_bytes(no_nic, "x.xml", NcclImportOptions(hosts=2))
    with pytest.raises(NcclImportError, match="not both"):
        import_nccl_file(path, NcclImportOptions(nvlink_bw=Fraction(1), nvswitch_bw=Fraction(1)))
    with pytest.raises(NcclImportError, match="between 1 and"):
        import_nccl_file(path, NcclImportOptions(hosts=0))


# ------------------------------------------------------------------ hostile XML


def billion_laughs(body):
    """A document whose entity lol9 would expand to 10^9 'lol's, used inside ``body``."""
    decls, prev = ['<!ENTITY lol "lol">'], "lol"
    for i in range(2, 10):
        decls.append(f'<!ENTITY lol{i} "{("&" + prev + ";") * 10}">')
        prev = f"lol{i}"
    return ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n' + "\n".join(decls) + "\n]>\n"
            + body).encode()


BILLION_LAUGHS = billion_laughs('<system><cpu><pci busid="&lol9;" class="0x030200"/></cpu>'
                                "</system>\n")


def external_entity(secret_path):
    return (f'<?xml version="1.0"?>\n<!DOCTYPE system [ <!ENTITY xxe SYSTEM '
            f'"file://{secret_path}"> ]>\n<system><cpu numaid="&xxe;">'
            '<pci busid="0000:01:00.0" class="0x030200"/></cpu></system>\n').encode()


def test_billion_laughs_is_refused_quickly(tmp_path):
    path = tmp_path / "laughs.xml"
    path.write_bytes(BILLION_LAUGHS)
    start = time.perf_counter()
    with pytest.raises(CanopyError, match="entities"):
        import_nccl_file(path)
    assert time.perf_counter() - start < 2


def test_external_entity_is_refused_and_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    path = tmp_path / "xxe.xml"
    path.write_bytes(external_entity(secret))
    with pytest.raises(CanopyError) as info:
        import_nccl_file(path)
    assert "TOP-SECRET-VALUE" not in str(info.value)


def test_oversized_file_is_refused(tmp_path, monkeypatch):
    import canopy.engine.safe_xml as safe_xml
    monkeypatch.setattr(safe_xml, "MAX_XML_BYTES", 1000)
    path = tmp_path / "big.xml"
    path.write_bytes(b"<system>" + b"<cpu/>" * 400 + b"</system>")
    with pytest.raises(CanopyError, match="larger than"):
        import_nccl_file(path)


def test_too_many_elements_are_refused():
    xml = b"<system>" + b"<cpu/>" * 100_001 + b"</system>"
    with pytest.raises(NcclImportError, match="XML elements"):
        import_nccl_bytes(xml, "many.xml")


# ------------------------------------------------------------------ CLI


def test_cli_import_nccl_warns_on_stderr_and_writes(tmp_path, capsys):
    out = tmp_path / "odd.json"
    code = main(["import-nccl", str(DATA / "nccl-odd-dump.xml"), "-o", str(out),
                 "--name", "odd"])
    captured = capsys.readouterr()
    assert code == 0
    lines = [line for line in captured.err.splitlines() if line]
    assert len(lines) == len(ODD_WARNINGS)
    assert all(line.startswith("canopy: warning: ") for line in lines)
    assert load_topology(out).name == "odd"
    assert f"{len(ODD_WARNINGS)} warnings" in captured.out


def test_cli_import_nccl_options_and_errors(tmp_path, capsys):
    out = tmp_path / "a100.json"
    assert main(["import-nccl", str(DATA / "nccl-dgx-a100-dump.xml"), "--hosts", "2",
                 "--net", "single", "-o", str(out)]) == 0
    assert "net" in load_topology(out).node_ids()
    laughs = tmp_path / "laughs.xml"
    laughs.write_bytes(BILLION_LAUGHS)
    assert main(["import-nccl", str(laughs), "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "entities" in err and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()
