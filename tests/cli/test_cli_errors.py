"""Every bad input gets one sentence naming the culprit and exit code 2."""

import json
import subprocess
import sys

import pytest

from canopy.cli import main

GOOD_NODES = [{"id": "a", "kind": "compute"}, {"id": "b", "kind": "compute"},
              {"id": "w", "kind": "switch"}]
GOOD_LINKS = [{"source": "a", "target": "w", "bandwidth": 10},
              {"source": "b", "target": "w", "bandwidth": 10}]


def topo(nodes=GOOD_NODES, links=GOOD_LINKS, **top):
    data = {"format": "canopy-topology", "version": 1, "nodes": nodes, "links": links}
    data.update(top)
    return json.dumps(data)


def bw(value):
    return topo(links=[{"source": "a", "target": "w", "bandwidth": value}, GOOD_LINKS[1]])


CASES = {
    "not-json": ("{oops", ["not valid JSON"]),
    "wrong-format": (topo(format="something"), ["format is 'something'"]),
    "bad-version": (topo(version=2), ["version 2 is not supported"]),
    "duplicate-id": (topo(nodes=GOOD_NODES + [{"id": "a", "kind": "switch"}]),
                     ["'a'", "more than once"]),
    "unknown-node": (topo(links=GOOD_LINKS + [{"source": "a", "target": "zz", "bandwidth": 1}]),
                     ["unknown node 'zz'"]),
    "self-loop": (topo(links=GOOD_LINKS + [{"source": "b", "target": "b", "bandwidth": 1}]),
                  ["'b' to itself"]),
    "zero-bw": (bw(0), ["a - w", "must be positive"]),
    "negative-bw": (bw(-5), ["a - w", "must be positive"]),
    "nan-bw": (bw("NaN"), ["a - w", "not finite"]),
    "nan-literal": (topo().replace('"bandwidth": 10', '"bandwidth": NaN', 1), ["NaN"]),
    "inf-bw": (bw("Infinity"), ["a - w", "not finite"]),
    "text-bw": (bw("fast"), ["a - w", "'fast'", "not a number"]),
    "no-bw": (topo(links=[{"source": "a", "target": "w"}, GOOD_LINKS[1]]),
              ["link 0 (a - w) has no bandwidth; give one in GB/s"]),
    "no-nodes": ('{"format": "canopy-topology", "version": 1, "links": []}',
                 ["has no 'nodes' list"]),
    "one-compute": (topo(nodes=[{"id": "a", "kind": "compute"}, {"id": "b", "kind": "switch"},
                                {"id": "w", "kind": "switch"}]), ["1 compute node"]),
    "cut-off": (topo(nodes=GOOD_NODES + [{"id": "c", "kind": "compute"},
                                         {"id": "v", "kind": "switch"}],
                     links=GOOD_LINKS + [{"source": "c", "target": "v", "bandwidth": 5}]),
                ["compute node 'c'", "zero bandwidth"]),
    "unbalanced": (topo(links=GOOD_LINKS + [{"source": "a", "target": "b", "bandwidth": 4,
                                            "duplex": False}]),
                   ["node 'a' is unbalanced", "ingress 10 GB/s", "egress 14 GB/s"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_one_sentence_exit_2(name, tmp_path, capsys):
    text, fragments = CASES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert str(path) in err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_missing_file(capsys, tmp_path):
    assert main(["solve", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_real_process_has_no_traceback(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(CASES["unbalanced"][0])
    proc = subprocess.run([sys.executable, "-m", "canopy.cli", "solve", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "unbalanced" in proc.stderr


@pytest.mark.parametrize("verb", [["solve"], ["verify", "x.json"], ["import-nccl", "-o", "x"],
                                  ["import-graphml", "-o", "x"], ["export-nccl-topo", "-o", "x"]])
def test_a_folder_is_one_sentence_in_every_verb(verb, tmp_path, capsys):
    assert main([verb[0], str(tmp_path), *verb[1:]]) == 2
    assert capsys.readouterr().err == f"canopy: {tmp_path} is a folder, not a file.\n"


def test_a_bad_option_value_is_one_sentence(capsys):
    with pytest.raises(SystemExit, match="2"):
        main(["solve", "samples/dgx-a100-2x8.json", "--k", "abc"])
    assert capsys.readouterr().err == (
        "canopy solve: argument --k: 'abc' is not a positive integer ('canopy solve --help' "
        "lists the options).\n")
    with pytest.raises(SystemExit, match="2"):
        main(["generate", "cluster", "--servers", "2"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage" not in err and "-o/--output" in err


def test_a_missing_output_folder_is_named(tmp_path, capsys):
    out = tmp_path / "nowhere" / "out.json"
    assert main(["solve", "samples/forestcoll-fig2.json", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"canopy: {out} cannot be written: the folder {out.parent} does not "
                   "exist.\n")
