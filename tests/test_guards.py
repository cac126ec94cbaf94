"""Documented limits, units, exit codes and logs: bad input is one sentence and exit code 2,
an internal error exit code 70 and a log file."""

import json
import subprocess
import sys
from fractions import Fraction

import pytest

from canopy.cli import main
from canopy.engine.generators import generate
from canopy.engine.io.graphml import dumps_graphml, loads_graphml
from canopy.engine.io.schedule_json import load_schedule
from canopy.engine.io.topology_json import dumps_topology, loads_topology
from canopy.engine.model.limits import LONG_DIGITS, MAX_FILE_BYTES, TOO_LONG_TEXT, number_text
from canopy.engine.model.units import UNITS

NODES = [{"id": "a"}, {"id": "b"}, {"id": "w", "kind": "switch"}]


def topo_text(bandwidth="10", unit=None, nodes=NODES) -> str:
    data = {"format": "canopy-topology", "version": 1, "nodes": nodes,
            "links": [{"source": "a", "target": "w", "bandwidth": "@"},
                      {"source": "b", "target": "w", "bandwidth": 10}]}
    if unit:
        data["bandwidth_unit"] = unit
    return json.dumps(data).replace('"@"', bandwidth)


CASES = {
    "huge-exponent": (topo_text("1e999999999"), ["a - w", "outside the range 1e-1000"]),
    "tiny-exponent": (topo_text('"1e-999999999"'), ["a - w", "outside the range"]),
    "many-digits": (topo_text("7" * 5000), ["a - w", "5000 digits", "at most 1000 digits"]),
    "long-fraction": (topo_text(f'"1/{"3" * 2000}"'), ["a - w", "2000 digits"]),
    "nested": ("[" * 100_000 + "]" * 100_000, ["nests arrays or objects too deeply"]),
    "nul-id": (topo_text(nodes=[{"id": "a\u0000b"}, *NODES[1:]]), ["control character"]),
    "unknown-unit": (topo_text(unit="Mb/s"), ["bandwidth_unit 'Mb/s'", "GiB/s"]),
    "long-number-elsewhere": (topo_text().replace('"version": 1', '"version": 1, "x": '
                                                  + "9" * 5000), ["number that has 5000"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_of_range_input_is_one_sentence(name, tmp_path, capsys):
    text, fragments = CASES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and "4300" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_schedule_files_have_the_same_limits(tmp_path, capsys):
    topo = tmp_path / "t.json"
    topo.write_text(topo_text())
    big = tmp_path / "big.s.json"
    big.write_text('{"format": "canopy-schedule", "k": ' + "7" * 200_000 + "}")
    nested = tmp_path / "nested.s.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["verify", str(topo), str(big)]) == 2
    assert "200000 digits" in capsys.readouterr().err
    assert main(["verify", str(topo), str(nested)]) == 2
    assert "too deeply" in capsys.readouterr().err


def test_file_size_limit(tmp_path, capsys):
    path = tmp_path / "big.json"
    with path.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    assert main(["solve", str(path)]) == 2
    assert "Canopy reads topology files of at most 32.0 MiB" in capsys.readouterr().err


def test_duplicate_graphml_node_ids_are_refused():
    text = dumps_graphml(loads_topology(topo_text()))
    doubled = text.replace(b'<node id="b">', b'<node id="a"></node><node id="b">', 1)
    with pytest.raises(Exception, match="node id 'a' is used more than once"):
        loads_graphml(doubled, "dup.graphml")


@pytest.mark.parametrize("unit,gbps", [("GB/s", Fraction(10)), ("GiB/s", Fraction("10.73741824")),
                                       ("Gb/s", Fraction(5, 4)), ("Gib/s", Fraction("1.34217728"))])
def test_units_convert_exactly_and_round_trip(unit, gbps):
    topo = loads_topology(topo_text("10", unit))
    assert topo.links[0].bandwidth == gbps
    again = json.loads(dumps_topology(topo))
    assert again["bandwidth_unit"] == unit and again["links"][0]["bandwidth"] == 10
    graph = loads_graphml(dumps_graphml(topo), "round.graphml")
    assert graph.bandwidth_unit == unit and graph.links[0].bandwidth == gbps


def test_generators_take_a_unit():
    topo = generate("ring", {"n": 4, "bandwidth": "100"}, unit="Gb/s")
    assert topo.bandwidth_unit == "Gb/s" and topo.links[0].bandwidth == Fraction(25, 2)
    assert set(UNITS) == {"GB/s", "GiB/s", "Gb/s", "Gib/s"}


def test_results_name_their_unit(tmp_path, capsys):
    path = tmp_path / "gb.json"
    path.write_text(topo_text("10", "Gb/s"))
    assert main(["solve", str(path)]) == 0
    assert "optimal algbw:   20 Gb/s" in capsys.readouterr().out
    assert main(["solve", str(path), "--bandwidth-unit", "GB/s"]) == 0
    assert "optimal algbw:   2.5 GB/s" in capsys.readouterr().out


def test_json_dash_writes_standard_output(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(topo_text())
    assert main(["solve", str(path), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["format"] == "canopy-schedule"
    assert "optimal algbw" in captured.err


def test_help_documents_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for code in ("0 ", "2 ", "70 ", "130 "):
        assert f"\n  {code}" in out


def test_internal_error_exits_70_with_the_traceback_in_the_log(tmp_path):
    log = tmp_path / "canopy.log"
    path = tmp_path / "t.json"
    path.write_text(topo_text())
    code = ("import sys, canopy.engine.forestcoll.solve as s\n"
            "def boom(*a, **k): raise ZeroDivisionError('boom')\n"
            "s.solve = boom\n"
            "from canopy.cli import main\n"
            f"sys.exit(main(['solve', {str(path)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={"CANOPY_LOG": str(log), "PATH": "/usr/bin"})
    assert proc.returncode == 70
    assert "Traceback" not in proc.stderr and str(log) in proc.stderr
    assert "ZeroDivisionError: boom" in proc.stderr
    assert "Traceback" in log.read_text()


def big_k_text() -> str:
    """Six GPUs in a ring of 1/(10^999 + odd) GB/s links: Prop. 3's k has 4995 digits, past
    the 4300 Python prints by default (printing it once failed with exit code 70)."""
    names = "abcdef"
    links = [{"source": a, "target": b, "bandwidth": f"1/{10**999 + 2 * i + 1}"}
             for i, (a, b) in enumerate(zip(names, names[1:] + names[:1], strict=True))]
    return json.dumps({"format": "canopy-topology", "version": 1,
                       "nodes": [{"id": n} for n in names], "links": links})


def test_a_k_too_long_to_print_is_printed_short_and_kept_exact(tmp_path, capsys):
    path, out = tmp_path / "bigk.json", tmp_path / "bigk.s.json"
    path.write_text(big_k_text())
    assert main(["solve", str(path), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert ("at the optimum:  about 1.33333e+4994 (an integer of 4995 digits) trees per GPU"
            in text)
    assert max(len(line) for line in text.splitlines()) < 250
    k = json.loads(out.read_text())["k"]
    assert len(str(k)) == 4995 and load_schedule(out).k == k
    assert main(["verify", str(path), str(out)]) == 0
    assert main(["compare", str(path)]) == 2    # floats cannot time 1e-999 GB/s links
    assert "floating point" in capsys.readouterr().err


def test_a_result_past_the_long_limit_is_one_sentence(tmp_path, capsys, monkeypatch):
    import canopy.engine.deploy.best_schedule

    def longer(*args, **kwargs):
        return str(10 ** (LONG_DIGITS + 1))
    monkeypatch.setattr(canopy.engine.deploy.best_schedule, "best_schedule", longer)
    path = tmp_path / "t.json"
    path.write_text(topo_text())
    assert main(["solve", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"canopy: {TOO_LONG_TEXT}"


def test_number_text():
    assert number_text(Fraction(1040, 3)) == "1040/3"
    assert number_text(10**40) == "about 1.00000e+40 (an integer of 41 digits)"
    assert number_text(Fraction(1, 3**30000)) == "about 2.30334e-14314 (p/q of 1 and 14314 digits)"


@pytest.mark.parametrize("change, fragment", [
    (("multiplicity", "Infinity"), "malformed schedule (OverflowError"),
    (("index", "Infinity"), "malformed schedule (OverflowError"),
    (("collective", '"Infinity"'), "collective 'Infinity' is not one of allgather"),
    (("algbw_exact", '{"k": 1}'), "is not a number"),
])
def test_schedule_fields_of_the_wrong_kind_are_one_sentence(tmp_path, capsys, change,
                                                            fragment):
    """Found by bench/fuzz.py: an infinite count, a collective Canopy does not know and a
    claimed algbw that is an object gave internal errors in ``canopy verify``."""
    from canopy.engine import load_sample, solve
    from canopy.engine.io.schedule_json import save_schedule

    topo = load_sample("forestcoll-fig2.json")
    good = tmp_path / "s.json"
    save_schedule(solve(topo, "allgather"), good)
    data = json.loads(good.read_text())
    field, value = change
    if field in ("multiplicity", "index"):
        data["trees"][0][field] = "@"
    else:
        data[field] = "@"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data).replace('"@"', value))
    assert main(["verify", "samples/forestcoll-fig2.json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err
