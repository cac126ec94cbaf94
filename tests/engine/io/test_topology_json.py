import json
from fractions import Fraction

import pytest

from canopy.engine.io.topology_json import (
    STEP_ITEMS,
    dumps_topology,
    finish,
    load_sample,
    load_topology,
    loads_topology,
    reading_steps,
    sample_names,
    save_topology,
)
from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import format_number, parse_bandwidth


def doc(**extra):
    base = {"format": "canopy-topology", "version": 1, "name": "t",
            "nodes": [{"id": "a", "kind": "compute"}, {"id": "b", "kind": "compute"}],
            "links": [{"source": "a", "target": "b", "bandwidth": 12.5}]}
    base.update(extra)
    return json.dumps(base)


def test_decimal_bandwidth_is_exact():
    topo = loads_topology(doc())
    assert topo.links[0].bandwidth == Fraction(25, 2)
    assert loads_topology(doc(links=[{"source": "a", "target": "b", "bandwidth": 0.1}])
                          ).links[0].bandwidth == Fraction(1, 10)
    assert parse_bandwidth("1/3") == Fraction(1, 3)
    assert parse_bandwidth("2.50") == Fraction(5, 2)


def test_format_number_round_trips():
    for v in [Fraction(3), Fraction(25, 2), Fraction(1, 3), Fraction(1, 8)]:
        assert parse_bandwidth(format_number(v)) == v


def test_duplex_one_way_and_parallel_links_add_up():
    topo = loads_topology(doc(links=[
        {"source": "a", "target": "b", "bandwidth": 10},
        {"source": "a", "target": "b", "bandwidth": "2.5", "duplex": False},
        {"source": "b", "target": "a", "bandwidth": 1, "duplex": False}]))
    caps = topo.capacities()
    assert caps[("a", "b")] == Fraction(25, 2)
    assert caps[("b", "a")] == 11


def test_unknown_keys_survive_round_trip(tmp_path):
    text = doc(vendor={"rack": 7}, nodes=[
        {"id": "a", "kind": "compute", "serial": "X1", "x": 1.5, "y": 2},
        {"id": "b", "kind": "switch", "ports": 64}],
        links=[{"source": "a", "target": "b", "bandwidth": 3, "cable": "AOC", "latency": 0.5}])
    topo = loads_topology(text)
    path = tmp_path / "t.json"
    save_topology(topo, path)
    again = load_topology(path)
    data = json.loads(path.read_text())
    assert data["vendor"] == {"rack": 7}
    assert data["nodes"][0]["serial"] == "X1"
    assert data["nodes"][1]["ports"] == 64
    assert data["links"][0]["cable"] == "AOC"
    assert again.links[0].latency == Fraction(1, 2)
    assert dumps_topology(again) == dumps_topology(topo)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "t.json"
    save_topology(loads_topology(doc()), path)
    save_topology(loads_topology(doc(name="second")), path)
    assert json.loads(path.read_text())["name"] == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_samples_load():
    assert "dgx-a100-2x8.json" in sample_names()
    assert len(load_sample().compute_nodes()) == 16


@pytest.mark.parametrize("text, fragment", [
    ("{not json", "is not valid JSON"),
    (json.dumps({"format": "other", "version": 1}), "format is 'other'"),
    (json.dumps({"format": "canopy-topology", "version": 9}), "version 9 is not supported"),
])
def test_header_errors(text, fragment):
    with pytest.raises(TopologyError, match=fragment):
        loads_topology(text, "f.json")


def test_save_keeps_permissions(tmp_path):
    import os
    path = tmp_path / "t.json"
    save_topology(loads_topology(doc()), path)
    assert path.stat().st_mode & 0o077 != 0  # not mkstemp's private 0600
    os.chmod(path, 0o640)
    save_topology(loads_topology(doc()), path)
    assert path.stat().st_mode & 0o777 == 0o640


def test_reading_in_steps_gives_the_same_topology_and_the_same_errors(tmp_path):
    """reading_steps reads a file a step at a time (an editor reads a slice per turn of
    its event loop): the same topology as load_topology, errors raised from a step."""
    from bench.clusters import dgx_a100_cluster

    path = tmp_path / "large.json"
    save_topology(dgx_a100_cluster(8), path)
    steps = reading_steps(path)
    count = 0
    try:
        while True:
            next(steps)
            count += 1
    except StopIteration as end:
        topology = end.value
    assert count >= (len(topology.nodes) + len(topology.links)) // STEP_ITEMS
    assert topology == load_topology(path)
    bad = tmp_path / "bad.json"
    bad.write_text(doc(links=[{"source": "a", "target": "b", "bandwidth": -4}]))
    with pytest.raises(TopologyError) as error:
        finish(reading_steps(bad))
    assert str(error.value) == f"{bad}: link 0 (a - b) has bandwidth -4, which must be positive."
    bad.write_text("{not json")
    with pytest.raises(TopologyError, match="is not valid JSON"):
        finish(reading_steps(bad))


def test_a_save_removes_what_a_killed_save_left_beside_the_file(tmp_path):
    """A writer killed between mkstemp and rename leaves ``.NAME.PID.xxxx.tmp``; the
    next save of that file removes it (its process is gone), never a live writer's."""
    import os

    from canopy.engine.io.topology_json import atomic_write_text
    target = tmp_path / "a.json"
    dead = tmp_path / ".a.json.999999999.x1.tmp"
    live = tmp_path / f".a.json.{os.getppid()}.x2.tmp"
    dead.write_text("half")
    live.write_text("half")
    atomic_write_text(target, "{}")
    assert not dead.exists() and live.exists()
    assert target.read_text() == "{}"


def test_a_temporary_file_whose_process_id_was_reused_goes(tmp_path):
    """A killed writer's id may belong to a new process by the next save: a process that
    started after the file was last written did not write it."""
    import os
    import subprocess
    import sys

    from canopy.engine.io.topology_json import remove_orphaned_temporaries
    target = tmp_path / "a.json"
    target.write_text("{}")
    newcomer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reused = tmp_path / f".a.json.{newcomer.pid}.x1.tmp"
        mine = tmp_path / f".a.json.{newcomer.pid}.x2.tmp"
        reused.write_text("half")
        mine.write_text("half")
        os.utime(reused, (1_000_000_000, 1_000_000_000))      # written in 2001
        other = tmp_path / ".b.json.999999999.x3.tmp"          # another file's: not ours
        other.write_text("half")
        assert remove_orphaned_temporaries(target) == 1
        assert not reused.exists() and mine.exists() and other.exists()
    finally:
        newcomer.kill()
        newcomer.wait()
