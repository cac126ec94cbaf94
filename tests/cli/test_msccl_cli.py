"""``canopy solve --msccl/--trees-xml`` and ``canopy check-xml``: files, exit codes, errors."""

import dataclasses
import subprocess
import sys
from importlib import resources

import pytest

from canopy.cli import exports, main
from canopy.engine.io.safe_xml import parse_xml_file
from canopy.engine.msccl import MscclLimits, MscclOptions
from canopy.engine.msccl.executor import simulate_file

SAMPLE = str(resources.files("canopy.samples").joinpath("dgx-a100-2x8.json"))


@pytest.mark.parametrize("mode, flag", [("inplace", []), ("outofplace", ["--out-of-place"]),
                                        ("inplace", ["--inplace"])])
def test_solve_writes_checked_msccl_and_trees(tmp_path, capsys, mode, flag):
    out, trees = tmp_path / "ar.xml", tmp_path / "trees.xml"
    assert main(["solve", SAMPLE, "--collective", "allreduce", "--msccl", str(out),
                 "--trees-xml", str(trees), *flag]) == 0
    printed = capsys.readouterr().out
    assert f"MSCCL XML:       {out} (allreduce, 16 GPUs, " in printed
    assert "the result is correct" in printed
    assert f"trees XML:       {trees} (" in printed
    assert parse_xml_file(out).get(mode) == "1"
    assert parse_xml_file(trees).tag == "trees"
    assert simulate_file(out).coll == "allreduce"


def test_solve_msccl_channels(tmp_path, capsys):
    out = tmp_path / "ag.xml"
    assert main(["solve", SAMPLE, "--msccl", str(out), "--msccl-channels", "1",
                 "--msccl-layout", "compact"]) == 0
    assert parse_xml_file(out).get("nchannels") == "1"
    with pytest.raises(SystemExit):
        main(["solve", SAMPLE, "--msccl", str(out), "--msccl-channels", "0"])
    assert "'0' is not a positive integer" in capsys.readouterr().err


def _written(out):
    """The XMLs an export to ``out`` wrote: ``out`` (the largest messages') and, where the
    choice differs by size, one below 512M beside it (2 x DGX A100 reduce-scatter: k = 7
    from 512 MiB, k = 13 below, tests/engine/deploy/test_msccl_ranges.py)."""
    assert out.exists()
    below = type(out)(f"{str(out)[:-4]}-below-512M.xml")
    return [below, out] if below.exists() else [out]


def test_solve_msccl_runtime(tmp_path):
    out = tmp_path / "rs.xml"
    assert main(["solve", SAMPLE, "--collective", "reduce-scatter", "--msccl", str(out),
                 "--msccl-runtime", "rccl"]) == 0
    for path in _written(out):
        assert parse_xml_file(path).get("coll") == "reducescatter"


def test_check_xml_accepts_an_export(tmp_path, capsys):
    out = tmp_path / "ag.xml"
    assert main(["solve", SAMPLE, "--msccl", str(out)]) == 0
    capsys.readouterr()
    assert main(["check-xml", str(out)]) == 0
    line = capsys.readouterr().out
    assert line.startswith(f"OK: {out}: allgather, 16 GPUs, in place: ")
    assert line.count("\n") == 1


def test_check_xml_reports_one_sentence_and_exit_2(tmp_path, capsys):
    out = tmp_path / "ag.xml"
    main(["solve", SAMPLE, "--msccl", str(out)])
    capsys.readouterr()
    out.write_text(out.read_text().replace('type="r"', 'type="s"', 1))
    assert main(["check-xml", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"canopy: {out}: rank ") and err.count("\n") == 1
    assert "unmatched" in err or "no send peer" in err


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE algo [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<algo name="&lol3;"/>
"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE algo [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<algo name="&secret;" proto="Simple"/>
"""


@pytest.mark.parametrize("content, expected", [
    (BILLION_LAUGHS, "declares XML entities"),
    (EXTERNAL, "declares XML entities"),
    (b"<algo", "is not well-formed XML"),
    (b"<algo name='x'/>", "<algo> has no 'coll' attribute"),
])
def test_check_xml_refuses_unsafe_or_broken_files(tmp_path, capsys, content, expected):
    path = tmp_path / "evil.xml"
    path.write_bytes(content)
    assert main(["check-xml", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "root:" not in err and err.count("\n") == 1


def test_check_xml_missing_file_and_bad_capacity(tmp_path, capsys):
    assert main(["check-xml", str(tmp_path / "none.xml")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["check-xml", str(tmp_path / "none.xml"), "--capacity", "0"])
    assert info.value.code == 2
    assert "'0' is not a positive integer" in capsys.readouterr().err


def test_check_xml_runs_as_a_command(tmp_path):
    out = tmp_path / "rs.xml"
    main(["solve", SAMPLE, "--collective", "reduce-scatter", "--msccl", str(out),
          "--out-of-place"])
    done = subprocess.run([sys.executable, "-m", "canopy.cli", "check-xml",
                           str(_written(out)[-1])],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "reduce_scatter, 16 GPUs, out of place" in done.stdout


def test_solve_names_the_largest_k_when_limits_are_exceeded(tmp_path, capsys, monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Tight(MscclLimits):                     # 45 elements: what k = 1 needs on the A100s
        max_elements_per_gpu: int = 45

    monkeypatch.setattr("canopy.engine.msccl.MscclLimits", Tight)  # read at export time
    out = tmp_path / "ag.xml"
    assert main(["solve", SAMPLE, "--msccl", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not fit the runtime's limits" in err
    assert "at k = 13; the largest fixed k that fits is " in err
    assert err.rstrip().endswith(").") and not out.exists()


def test_solve_reports_an_export_that_fails_simulation(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("canopy.engine.deploy.msccl_ranges.plan_xml", lambda *args, **kw:
    b"<algo/>")
    assert main(["solve", SAMPLE, "--msccl", str(tmp_path / "x.xml")]) == 2
    err = capsys.readouterr().err
    assert "failed Canopy's simulator, which is a bug in Canopy" in err
    assert not (tmp_path / "x.xml").exists()


@pytest.mark.parametrize("layout", ["pipelined", "compact"])
def test_solve_msccl_layout(tmp_path, layout):
    out = tmp_path / "ag.xml"
    fig2 = str(resources.files("canopy.samples").joinpath("forestcoll-fig2.json"))
    assert main(["solve", fig2, "--msccl", str(out), "--msccl-layout", layout]) == 0
    steps = [len(tb.findall("step")) for tb in parse_xml_file(out).iter("tb")]
    assert (max(steps) == 1) == (layout == "pipelined")


def test_export_option_defaults_match_the_engine():
    """cli/exports.py spells MSCCL's defaults so the parser need not import the lowering."""
    assert (exports.CHANNELS, exports.LAYOUT, exports.RUNTIME, exports.SMS) == (
        MscclOptions.channels, MscclOptions.layout, MscclOptions.runtime,
        MscclLimits.max_tbs_per_gpu)


def test_sms_bound_the_thread_blocks_of_export_and_check(tmp_path, capsys):
    """--msccl-sms keeps the export within the GPU's SMs; check-xml --sms rejects more."""
    out = tmp_path / "ag.xml"
    assert main(["solve", SAMPLE, "--msccl", str(out), "--msccl-sms", "40"]) == 0
    most = max(len(gpu.findall("tb")) for gpu in parse_xml_file(out).iter("gpu"))
    assert most <= 40
    capsys.readouterr()
    assert main(["check-xml", str(out), "--sms", str(most - 1)]) == 2
    assert f"thread blocks; they must all be resident at once, and the GPU has {most - 1} " \
        "SMs" in capsys.readouterr().err
