"""NCCL topology export: every server Canopy imports is written back as the same server."""


import pytest

from canopy.cli import main
from canopy.engine.forestcoll.optimum import optimum
from canopy.engine.io.nccl_topology_export import (
    NcclTopoExportError,
    nccl_topology_xml,
    same_server,
)
from canopy.engine.io.nccl_topology_import import (
    NcclImportError,
    NcclImportOptions,
    import_nccl_bytes,
)
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.topology import find_problems
from tests import ROOT

FILES = sorted((ROOT.parent / "shared" / "data" / "nccl-topo").glob("*.xml")) + \
    sorted((ROOT / "tests" / "data").glob("nccl-*.xml"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_imported_server_round_trips(path):
    options = NcclImportOptions(hosts=2, nvswitch_bw=300)
    try:
        first = import_nccl_bytes(path.read_bytes(), path.name, options).topology
    except NcclImportError:
        return        # a file with no GPU: nothing to export (the importer says so)
    second = import_nccl_bytes(nccl_topology_xml(first), path.name, options).topology
    assert same_server(first, "h0", second, "h0")
    if not find_problems(first):           # (the odd dump is unbalanced on purpose)
        assert optimum(first).inverse_x == optimum(second).inverse_x


def test_the_shared_files_are_there():
    assert len(FILES) >= 7


def test_cli_writes_checks_and_names_the_import_command(tmp_path, capsys):
    cluster = tmp_path / "ndv4.json"
    source = ROOT.parent / "shared" / "data" / "nccl-topo" / "azure-ndv4-topo.xml"
    assert main(["import-nccl", str(source), "--hosts", "4", "--nvswitch-bw", "300", "-o",
                 str(cluster)]) == 0
    out = tmp_path / "server.xml"
    assert main(["export-nccl-topo", str(cluster), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "read back and checked" in text and "--hosts 4 --net rail" in text
    rebuilt = tmp_path / "again.json"
    assert main(["import-nccl", str(out), "--hosts", "4", "-o", str(rebuilt)]) == 0
    from canopy.engine.io.topology_json import load_topology
    assert optimum(load_topology(rebuilt)).inverse_x == \
        optimum(load_topology(cluster)).inverse_x


def test_servers_not_in_nccls_terms_are_refused_in_one_sentence(capsys):
    with pytest.raises(NcclTopoExportError, match="n0.nvswitch' is not named"):
        nccl_topology_xml(load_sample("dgx-a100-2x8"))
    assert main(["export-nccl-topo", "samples/dgx-a100-2x8.json", "-o", "/dev/null"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
