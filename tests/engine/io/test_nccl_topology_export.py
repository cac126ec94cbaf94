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
from tests import DATA, ROOT
from tests.shared_data import needs_shared, shared_files, shared_path

OWN_FILES = sorted(DATA.glob("nccl-*.xml"))
SHARED_FILES = shared_files("data/nccl-topo", "*.xml")


@pytest.mark.parametrize("path", OWN_FILES + [pytest.param(p, marks=needs_shared)
                                              for p in SHARED_FILES], ids=lambda p: p.name)
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


def test_the_project_files_are_there():
    assert len(OWN_FILES) >= 5


@needs_shared
def test_the_shared_files_are_there():
    shared_path("data", "nccl-topo")
    assert len(SHARED_FILES) >= 7


def test_cli_writes_checks_and_names_the_import_command(tmp_path, capsys):
    cluster = tmp_path / "ndv4.json"
    source = ROOT / "tests" / "data" / "nccl-dgx-a100-dump.xml"
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
    assert main(["export-nccl-topo", "samples/forestcoll-fig2.json", "-o", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'w1'" in err and "no place for it" in err


ACCEPTED = {"aws-p4d-2x8", "dgx-a100-2x8", "dgx-a100-4x8", "dgx-h100-2x8", "leaf-spine-jobs",
            "rail-leaf-spine-4x8", "tacos-3d-rfs-2x4x8", "tacos-dragonfly-4x5"}
REFUSED = {"forestcoll-fig2": "no place for it", "tacos-2d-switch-8x4": "no place for it",
           "hypercube-3d": "no GPU belongs to a server", "mesh-2d-3x3": "no GPU belongs",
           "mi250-2x16": "not whole numbers of NVLinks", "mi250-8plus8": "Infinity Fabric",
           "tpu-v4-4x4x4-torus": "not whole numbers of NVLinks"}


@pytest.mark.parametrize("name", sorted(ACCEPTED | set(REFUSED)))
def test_canopys_own_samples_export_in_nccls_terms_or_say_why_not(name, tmp_path, capsys):
    """Canopy's samples (generated, drawn, imported) are restated in NCCL's terms, every
    addition said, and read back as the restated server; the others get one sentence."""
    out = tmp_path / "server.xml"
    code = main(["export-nccl-topo", f"samples/{name}.json", "-o", str(out)])
    captured = capsys.readouterr()
    if name in ACCEPTED:
        assert code == 0 and "read back and checked" in captured.out
        if name != "aws-p4d-2x8":       # imported from NCCL's own terms: nothing to add
            assert "In NCCL's terms the file" in captured.out
    else:
        assert code == 2 and REFUSED[name] in captured.err and captured.err.count("\n") == 1


@pytest.mark.parametrize("options", [[], ["--gpu", "h100"], ["--gpu", "b200"],
                                     ["--nics-per-gpu", "1/2"], ["--scale-out", "leaf-spine"]])
def test_generated_clusters_export(options, tmp_path, capsys):
    path, out = tmp_path / "c.json", tmp_path / "c.xml"
    assert main(["generate", "cluster", *options, "-o", str(path)]) == 0
    assert main(["export-nccl-topo", str(path), "-o", str(out)]) == 0
    assert "read back and checked" in capsys.readouterr().out
