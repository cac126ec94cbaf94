"""NCCL topology import: real provider files, hand-made dumps with NVLink/NVSwitch, odd
elements, hosts and scale-out, and safety against hostile XML."""

import time
from collections import Counter
from fractions import Fraction

import pytest

from canopy.cli import main
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.nccl_topology_import import (
    NcclImportError,
    NcclImportOptions,
    import_nccl_bytes,
    import_nccl_file,
    inter_cpu_bandwidth,
    nccl_pci_bandwidth,
    nvlink_bandwidth,
)
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import find_problems
from canopy.engine.network.indexed import Network
from tests import DATA
from tests.shared_data import needs_shared, shared_files, shared_params, shared_path

REAL_FILES = shared_files("data/nccl-topo", "*.xml")
GEN3_X16 = Fraction(12)      # NCCL: 16 lanes x 60 (100 Mb/s per lane at 8 GT/s) / 80
GEN4_X16 = Fraction(24)
GEN5_X16 = Fraction(48)


def links_between(topo, a, b):
    return [link.bandwidth for link in topo.links if {link.source, link.target} == {a, b}]


def kinds(topo, role):
    return [n for n in topo.node_ids() if n.split(".")[-1].rstrip("0123456789") == role]


@pytest.mark.parametrize("speed, lanes, expected", [
    ("2.5 GT/s", 1, Fraction(15, 80)),             # NCCL's kvDictPciGen, x100 Mb/s per lane
    ("5 GT/s", 16, Fraction(6)),
    ("8 GT/s", 16, GEN3_X16),
    ("16.0 GT/s PCIe", 16, GEN4_X16),
    ("32.0 GT/s PCIe", 8, GEN4_X16),
    ("32.0 GT/s PCIe", 0, GEN5_X16),               # width 0 is 16 lanes
    ("64.0 GT/s PCIe", 16, Fraction(96)),
    ("", 0, GEN3_X16),                             # unknown speed: Gen3
    ("Unknown", 4, Fraction(3)),
])
def test_nccl_pci_bandwidth(speed, lanes, expected):
    assert nccl_pci_bandwidth(speed, lanes) == expected


@pytest.mark.parametrize("sm, per_link", [(60, 18), (70, 20), (80, 20), (86, 12),
                                          (90, Fraction("20.6")), (100, Fraction("40.1")),
                                          (999, Fraction("40.1")), (35, 20)])
def test_nvlink_bandwidth_by_sm(sm, per_link):
    assert nvlink_bandwidth(sm) == per_link


@pytest.mark.parametrize("arch, vendor, family, model, bw", [
    ("x86_64", "GenuineIntel", 6, 0x4F, 6), ("x86_64", "GenuineIntel", 6, 85, 10),
    ("x86_64", "GenuineIntel", 6, 0x8F, 22), ("x86_64", "GenuineIntel", 6, 0xCF, 40),
    ("x86_64", "AuthenticAMD", 25, 1, 16), ("arm64", "", None, None, 6),
    ("ppc64", "", None, None, 32), ("x86_64", "CentaurHauls", 7, 0x5B, 9)])
def test_inter_cpu_bandwidth(arch, vendor, family, model, bw):
    assert inter_cpu_bandwidth(arch, vendor, family, model) == bw


# ------------------------------------------------------------------ the provider files


@needs_shared
def test_the_shared_files_are_there():
    shared_path("data", "nccl-topo")
    assert len(REAL_FILES) >= 7


@needs_shared
@pytest.mark.parametrize("path", shared_params("data/nccl-topo", "*.xml"),
                         ids=lambda p: p.name)
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
    return shared_path("data", "nccl-topo", name)


@needs_shared
def test_p4d_pcie_tree_and_nic_defaults():
    result = import_nccl_file(_real("aws-p4d-24xl-topo.xml"), NcclImportOptions(nic_bw=12.5))
    topo = result.topology
    assert len(kinds(topo, "cpu")) == 2 and len(kinds(topo, "pcie")) == 4
    assert len(kinds(topo, "nic")) == 4
    assert links_between(topo, "h0.gpu0", "h0.pcie0") == [GEN3_X16]
    assert links_between(topo, "h0.pcie0", "h0.cpu0") == [GEN3_X16]
    assert links_between(topo, "h0.cpu0", "h0.cpu1") == [Fraction(10)]     # Intel sockets
    assert len(result.warnings) == 4
    assert all("no <net> port" in w and "12.5 GB/s" in w for w in result.warnings)
    assert "line 20" in result.warnings[0] and "0000:10:1b.0" in result.warnings[0]
    # Without NVLink the GPUs only meet over PCIe, and one GPU's Gen3 link is the bottleneck
    # (7/15.75 beats the 4 GPUs behind each 10 GB/s socket link, 4/10).
    assert find_optimum(Network.from_topology(topo)).inverse_x == 7 / GEN3_X16


@needs_shared
def test_p4d_two_hosts_on_rails():
    options = NcclImportOptions(hosts=2, nvswitch_bw=Fraction(300), nic_bw=Fraction("12.5"))
    topo = import_nccl_file(_real("aws-p4d-24xl-topo.xml"), options).topology
    assert sorted(n for n in topo.node_ids() if n.startswith("rail")) == [
        "rail0", "rail1", "rail2", "rail3"]
    assert links_between(topo, "h1.nic2", "rail2") == [Fraction("12.5")]
    assert links_between(topo, "h0.gpu5", "h0.nvswitch0") == [Fraction(300)]
    # One host's 4 NICs sit on PCIe Gen3 x16 links, 12 GB/s for NCCL, below their 12.5 GB/s:
    # 8 GPUs behind 48 GB/s, 1/x* = 8/48.
    assert find_optimum(Network.from_topology(topo)).inverse_x == Fraction(8, 48)
    assert topo.extra["imported_from"]["hosts"] == 2


@needs_shared
def test_single_network_switch_and_direct_nvlink_option():
    options = NcclImportOptions(hosts=2, net="single", nvlink_bw=Fraction(50))
    topo = import_nccl_file(_real("azure-ndv4-topo.xml"), options).topology
    assert "net" in topo.node_ids() and not any(n.startswith("rail") for n in topo.node_ids())
    assert sum(1 for link in topo.links if link.target == "net") == 16
    gpus = kinds(topo, "gpu")
    assert len(gpus) == 16
    assert links_between(topo, "h0.gpu0", "h0.gpu7") == [Fraction(50)]
    assert links_between(topo, "h0.gpu0", "h1.gpu0") == []


@needs_shared
def test_ndv5_gen5_links_and_infiniband_class():
    topo = import_nccl_file(_real("azure-ndv5-topo.xml")).topology
    assert links_between(topo, "h0.gpu0", "h0.pcie0") == [GEN5_X16]
    assert len(kinds(topo, "nic")) == 8                      # class 0x0207: InfiniBand


@needs_shared
def test_ncv4_self_nvlink_missing_speed_and_cpu_nic():
    result = import_nccl_file(_real("azure-ncv4-topo.xml"))
    topo = result.topology
    self_links = [w for w in result.warnings if "its own bus id" in w]
    missing = [w for w in result.warnings if "link_speed ''" in w and "Gen3" in w]
    assert len(self_links) == 4 and len(missing) == 4 and len(result.warnings) == 8
    assert "<nvlink target=\"0001:00:00.0\">" in self_links[0]
    # link_width="0" is 16 lanes and an empty link_speed is Gen3 for NCCL: 12 GB/s.
    assert links_between(topo, "h0.gpu0", "h0.cpu0") == [GEN3_X16]
    assert links_between(topo, "h0.nic0", "h0.cpu0") == [Fraction(5000)]   # NCCL's LOC_BW
    assert topo.extra is not None and result.topology.links
    assert "eth0" in topo.node("h0.nic0").label
    assert links_between(topo, "h0.cpu0", "h0.cpu3") == [Fraction(16)]      # AMD sockets


# ------------------------------------------------------------------ hand-made dumps


def test_dump_with_nvswitches():
    result = import_nccl_file(DATA / "nccl-dgx-a100-dump.xml", NcclImportOptions(hosts=2))
    topo = result.topology
    assert result.warnings == []
    assert len(topo.compute_nodes()) == 16
    # NCCL keeps one NVSwitch node per system, whatever the targets' bus ids.
    switches = [n for n in topo.node_ids() if ".nvswitch" in n]
    assert switches == ["h0.nvswitch0", "h1.nvswitch0"]
    # 6 targets x 2 links of NCCL's 20 GB/s for sm 80.
    assert links_between(topo, "h0.gpu3", "h0.nvswitch0") == [Fraction(240)]
    assert links_between(topo, "h1.nic7", "rail7") == [Fraction(25)]            # 200 Gb/s
    assert links_between(topo, "h0.nic0", "h0.pcie0") == [GEN4_X16]
    opt = find_optimum(Network.from_topology(topo))
    # A GPU's ingress (240 NVLink + its PCIe Gen4 x16 link) is the bottleneck.
    assert opt.inverse_x == 15 / (240 + GEN4_X16)


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
    assert set(nvlink.values()) == {Fraction(120)}           # 6 links of NCCL's 20 GB/s
    assert links_between(topo, "h0.gpu0", "h0.gpu3") == [Fraction(40)]
    assert links_between(topo, "h0.gpu0", "h0.gpu1") == [Fraction(20)]
    opts = NcclImportOptions(hosts=2, nvswitch_bw=Fraction(300))
    two = import_nccl_file(DATA / "nccl-dgx1-v100-dump.xml", opts)
    assert any("describes NVLink itself" in w for w in two.warnings)
    assert not any(".nvswitch" in n for n in two.topology.node_ids())
    # Two hosts: each host's 4 EDR NICs feed its 8 GPUs through PCIe Gen3 x16 links of
    # NCCL's 12 GB/s, below the NICs' 12.5 GB/s.
    assert find_optimum(Network.from_topology(two.topology)).inverse_x == Fraction(8, 48)


@pytest.mark.parametrize("dump", ["nccl-dgx-a100-dump.xml", "nccl-dgx1-v100-dump.xml",
                                  "nccl-h100-vm-dump.xml"])
@pytest.mark.parametrize("hosts", [1, 2])
def test_imported_dumps_solve(dump, hosts):
    topo = import_nccl_file(DATA / dump, NcclImportOptions(hosts=hosts)).topology
    schedule = solve(topo)
    assert schedule.algbw == find_optimum(Network.from_topology(topo)).algbw()


ODD_WARNINGS = [
    ("line 8", "own bus id"),
    ("line 10", "not a GPU in this file"),
    ("line 11", "links it to the NVSwitch"),
    ("line 12", "count 0"),
    ("line 15", "link_speed ''"),
    ("line 20", "class 0x010802"),
    ("line 21", "no busid"),
    ("line 24", "10000 Mb/s"),
    ("line 27", "has no class"),
    ("line 34", "<widget"),
    ("line 36", "<interconnect>"),
    ("nccl-odd-dump.xml:", "lists 80 GB/s of NVLink to GPU 1"),
]


def test_odd_elements_each_give_one_warning_and_the_rest_imports():
    result = import_nccl_file(DATA / "nccl-odd-dump.xml")
    assert len(result.warnings) == len(ODD_WARNINGS)
    for where, what in ODD_WARNINGS:
        assert sum(1 for w in result.warnings if where in w and what in w) == 1, (where, what)
    topo = result.topology
    assert len(topo.compute_nodes()) == 3
    # Each end's own count is its direction, as in NCCL: 4 x 20 one way, 2 x 20 back, and
    # GPU 2 (sm 999: NCCL's 40.1 per link) lists a link GPU 0 does not list back.
    oneway = {(link.source, link.target): link.bandwidth for link in topo.links
              if not link.duplex}
    assert oneway == {("h0.gpu0", "h0.gpu1"): 80, ("h0.gpu1", "h0.gpu0"): 40,
                      ("h0.gpu2", "h0.gpu0"): Fraction("40.1")}
    assert "unbalanced" in find_problems(topo)[0].message
    assert links_between(topo, "h0.gpu1", "h0.pcie0") == [GEN3_X16]       # unknown speed
    assert links_between(topo, "h0.gpu0", "h0.nvswitch0") == [Fraction(20)]


@pytest.mark.parametrize("old, new, words", [
    ('count="0"', 'count="-2"', "count '-2'"),
    ('count="0"', 'count="NaN"', "count 'NaN'"),
    ('count="0"', 'count="1.5"', "count '1.5'"),
    ('count="0"', 'count="' + "9" * 5000 + '"', "count '99999999999999999999…'"),
    ('<gpu dev="1" sm="80" rank="1">', '<gpu dev="1" sm="80" rank="0">', "rank 0, like"),
    ('busid="0000:04:00.0" class="0x030200"', 'busid="0000:02:00.0" class="0x030200"',
     "repeats the bus id"),
    ('link_speed="16 GT/s" link_width="16">\n      <gpu dev="2"',
     'link_speed="16 GT/s" link_width="-16">\n      <gpu dev="2"', "negative number of lanes"),
])
def test_what_nccl_cannot_use_is_an_error(old, new, words):
    text = (DATA / "nccl-odd-dump.xml").read_text()
    assert old in text
    with pytest.raises(NcclImportError, match=words):
        import_nccl_bytes(text.replace(old, new, 1).encode(), "odd.xml")


def test_h100_vm_dump_with_zero_link_widths_is_nic_limited():
    """link_width="0" on every GPU and NIC is 16 lanes for NCCL (48 GB/s at Gen5), not the
    hypervisor bridge's 2.5 GT/s x1: two hosts reach the NIC-limited 400 GB/s."""
    options = NcclImportOptions(hosts=2, nvswitch_bw=Fraction(450))
    topo = import_nccl_file(DATA / "nccl-h100-vm-dump.xml", options).topology
    assert links_between(topo, "h0.gpu0", "h0.pcie0") == [GEN5_X16]
    assert links_between(topo, "h0.pcie0", "h0.cpu0") == [Fraction(15, 80)]
    assert find_optimum(Network.from_topology(topo)).algbw() == 400


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
    import canopy.engine.io.safe_xml as safe_xml
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
    assert sum("nccl-odd-dump.xml" in line for line in lines) == len(ODD_WARNINGS)
    assert sum("unbalanced" in line for line in lines) == 3     # NCCL's one-way NVLink
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
