"""Fuzz every file reader: mutated valid files through the command line's error path.

For each format Canopy reads (topology JSON, GraphML, NCCL topology XML, MSCCL XML via
``check-xml``, schedule JSON via ``verify``, jobs JSON, sweep TOML, MSCCL++ execution
plans via ``check-plan``, InfiniBand fabric dumps via ``import-ib``, Slurm's topology.conf
via ``import-slurm``), valid files are
mutated (:mod:`bench.mutations`: structure-aware edits of the parsed file, then now and
then truncation, a wrong encoding or byte-level damage) and handed to the reader in
process, through the same error path as the ``canopy`` command. Every result must be a
clean answer (exit 0) or one sentence with exit 2; a traceback, an internal error
(exit 70), more than one line of error, a hang over :data:`HANG_SECONDS` of CPU or memory past
:data:`MEMORY_BYTES` is a finding, kept with its input. Every ``--cli-every``-th input
also goes through the real command (a new process) and must give the same exit code.

Runs happen in a worker process with an address-space limit and a watchdog, so a hang
or a crash of the reader is recorded rather than stopping the run. Prints one JSON
summary (inputs per format, outcomes, findings with the inputs saved to ``--keep``).

    nice -n 15 python -m bench.fuzz --count 20000 --seed 1 > fuzz.json
    python -m bench.fuzz --merge a.json b.json      # one summary of several runs
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import multiprocessing
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.mutations import mutate, mutate_bytes

ROOT = Path(__file__).resolve().parent.parent
HANG_SECONDS = 10
"""CPU seconds one input may take (CPU, not wall: at nice 15 on a shared machine the
wall clock says more about the neighbours than about the reader)."""
STALL_SECONDS = 600
"""Wall seconds a worker may go without a result before it is killed (a reader blocked
without using CPU)."""
MAX_INPUT_BYTES = 8 << 20
"""Mutated inputs are cut to this length (a repeated chunk can grow one past it)."""
MAX_KEPT = 40
"""Findings kept (with their inputs) per format and run; all are counted."""
MEMORY_BYTES = 1 << 30
"""Memory a reader may take over the worker's own before it counts as a finding."""


@dataclass
class Format:
    """A file format: its valid seed files, its kind for mutations, its file suffix and
    the command (in process) that reads a file of it."""

    name: str
    kind: str
    suffix: str
    make_seeds: Callable[[], list[bytes]]
    """Writes the valid seed files (once, when first needed: some are solved)."""
    argv: Callable[[str], list[str]] | None = None
    reader: Callable[[str], object] | None = None
    stems: list[str] | None = None
    """File name stem per seed (the schedule's topology: ``verify`` needs it)."""

    @property
    def seeds(self) -> list[bytes]:
        made = self.__dict__.get("_seeds")
        if made is None:
            made = self.__dict__["_seeds"] = self.make_seeds()
        return made

    def draw(self, rng: random.Random, index: int, workdir: str) -> tuple[bytes, str, Path]:
        """A mutated seed, how it was mutated, and the path it is written to."""
        which = rng.randrange(len(self.seeds))
        try:
            data, how = mutate(rng, self.seeds[which], self.kind)
        except (ValueError, RecursionError, MemoryError) as exc:   # the mutator's limits
            data, how = mutate_bytes(rng, self.seeds[which])
            how = f"{how} (structured mutation failed: {exc.__class__.__name__})"
        data = data[:MAX_INPUT_BYTES]
        stem = self.stems[which] if self.stems else "input"
        path = Path(workdir) / f"{stem}-{index % 7}{self.suffix}"
        path.write_bytes(data)
        return data, how, path


def _sample(name: str) -> bytes:
    return (ROOT / "samples" / name).read_bytes()


def _made(workdir: Path, argv: list[str], out: str) -> bytes:
    """A seed file written by ``canopy`` itself (MSCCL XML, schedules)."""
    from canopy.cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    assert code == 0, argv
    return (workdir / out).read_bytes()


def _check_jobs(path: str) -> object:
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.model.workloads import check_jobs, load_jobs
    jobs = load_jobs(path)
    check_jobs(load_sample("leaf-spine-jobs.json"), jobs, path)
    return jobs


def _read_spec(path: str) -> object:
    from canopy.engine.sweep.spec import load_spec
    return load_spec(path)


def _ib_dumps() -> list[bytes]:
    """Small fabrics in both dialects: a fat tree with SHARP nodes and a defect, a
    two-rail one, and the four-host fabric the ``--host-topo`` seed fills with GPUs."""
    from bench.ib_dump_writer import fat_tree, write_dump
    sharp = fat_tree(6, hosts_per_leaf=3, spines=2, sharp=True)
    sharp.set_rate(sharp.adapters[("node001", 0)], sharp.leaves[(0, 0)], "4xHDR")
    return [write_dump(sharp).encode(),
            write_dump(fat_tree(4, rails=2, hosts_per_leaf=2, spines=1), "space").encode(),
            write_dump(fat_tree(2, rails=8, hosts_per_leaf=2, spines=1)).encode()]


def _slurm_confs(workdir: Path) -> list[bytes]:
    """topology.conf of the rail leaf-spine sample (tree and block, as canopy writes
    them) and a hand-written one with comments, continuations, quotes and escapes."""
    rails = str(ROOT / "samples" / "rail-leaf-spine-4x8.json")
    made = [_made(workdir, ["export-slurm", rails, "--plugin", plugin, "-o",
                            str(workdir / f"{plugin}.conf")], f"{plugin}.conf")
            for plugin in ("tree", "block")]
    return made + [b'# a tree written by hand\nSwitchName=leaf1 Nodes=gpu[01-04] '
                   b'LinkSpeed=400 # leaf one\nswitchname="leaf2" nodes=gpu[05-07],\\\n'
                   b'gpu08\nSwitchName=spine\\#1 Switches=leaf[1-2]\n']


def formats(workdir: Path) -> dict[str, Format]:
    """Every fuzzed format with its seeds (some written into ``workdir`` by canopy)."""
    from canopy.engine.io.graphml import dumps_graphml
    from canopy.engine.io.topology_json import load_sample
    small = ["forestcoll-fig2.json", "dgx-a100-2x8.json", "mesh-2d-3x3.json",
             "hypercube-3d.json", "aws-p4d-2x8.json", "leaf-spine-jobs.json"]
    fig2 = str(ROOT / "samples" / "forestcoll-fig2.json")
    dgx = str(ROOT / "samples" / "dgx-a100-2x8.json")
    def msccl() -> list[bytes]:
        return [_made(workdir, ["solve", fig2, "--collective", c, "--msccl",
                                str(workdir / f"fig2-{c}.xml")], f"fig2-{c}.xml")
                for c in ("allgather", "allreduce")]

    def schedules() -> list[bytes]:     # in the order of the stems: fig2, dgx
        return [_made(workdir, ["solve", fig2, "--collective", "allreduce", "--json",
                                str(workdir / "fig2.sched.json")], "fig2.sched.json"),
                _made(workdir, ["solve", dgx, "--json", str(workdir / "dgx.sched.json")],
                      "dgx.sched.json")]

    def jobs() -> list[bytes]:
        listed = json.loads(_sample("leaf-spine-jobs.json"))["jobs"]
        return [json.dumps({"format": "canopy-jobs", "version": 1, "jobs": listed},
                           indent=1).encode()]

    def nccl() -> list[bytes]:
        return [_sample("nccl-h100-topo.xml")] + [
            p.read_bytes() for p in sorted((ROOT / "tests" / "data").glob("nccl-*.xml"))]

    def plans() -> list[bytes]:
        return [_made(workdir, ["solve", fig2, "--collective", c, "--mscclpp",
                                str(workdir / f"plan-{c}.json")], f"plan-{c}.json")
                for c in ("allgather", "allreduce", "reduce-scatter")]

    topo_of = {"fig2": fig2, "dgx": dgx}
    host_topo = str(ROOT / "samples" / "nccl-h100-topo.xml")
    return {
        "topology-json": Format("topology-json", "json", ".json",
                                lambda: [_sample(s) for s in small],
                                argv=lambda p: ["solve", p, "--bound-only"]),
        "graphml": Format("graphml", "xml", ".graphml",
                          lambda: [dumps_graphml(load_sample(s)) for s in small],
                          argv=lambda p: ["import-graphml", p, "-o",
                                          str(workdir / "out.json")]),
        "nccl-topology-xml": Format("nccl-topology-xml", "xml", ".xml", nccl,
                                    argv=lambda p: ["import-nccl", p, "-o",
                                                    str(workdir / "out.json")]),
        "msccl-xml": Format("msccl-xml", "xml", ".xml", msccl,
                            argv=lambda p: ["check-xml", p]),
        "schedule-json": Format(
            "schedule-json", "json", ".json", schedules,
            argv=lambda p: ["verify", topo_of[Path(p).stem.split("-")[0]], p],
            stems=list(topo_of)),
        "jobs-json": Format("jobs-json", "json", ".json", jobs, reader=_check_jobs),
        "sweep-toml": Format("sweep-toml", "toml", ".toml",
                             lambda: [_sample("sweep-rails.toml")], reader=_read_spec),
        "mscclpp-plan": Format("mscclpp-plan", "json", ".json", plans,
                               argv=lambda p: ["check-plan", p]),
        "ib-fabric": Format(
            "ib-fabric", "ibnet", ".txt", _ib_dumps,
            argv=lambda p: ["import-ib", p, "-o", str(workdir / "out.json"), "--no-cost",
                            *(["--host-topo", host_topo]
                              if Path(p).stem.startswith("hosts") else [])],
            stems=["fabric", "fabric", "hosts"]),
        "slurm-topology": Format(
            "slurm-topology", "slurm", ".conf", lambda: _slurm_confs(workdir),
            argv=lambda p: ["import-slurm", p, "-o", str(workdir / "out.json")]),
    }


def run_in_process(fmt: Format, path: str) -> tuple[int, str]:
    """(exit code, stderr) of reading ``path`` as the ``canopy`` command would."""
    from canopy.cli import EXIT_BAD_INPUT, EXIT_INTERNAL, main
    from canopy.engine.model.errors import CanopyError, one_line
    from canopy.engine.process.internal_errors import report_internal_error
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        if fmt.argv is not None:
            code = main(fmt.argv(path))
        else:
            assert fmt.reader is not None
            try:
                fmt.reader(path)
                code = 0
            except CanopyError as exc:
                print(f"canopy: {one_line(str(exc))}", file=sys.stderr)
                code = EXIT_BAD_INPUT
            except OSError as exc:
                print(f"canopy: {exc.strerror or exc}.", file=sys.stderr)
                code = EXIT_BAD_INPUT
            except Exception as exc:  # what the command reports as an internal error
                print(f"canopy: {report_internal_error(fmt.name, exc)}", file=sys.stderr)
                code = EXIT_INTERNAL
    return code, err.getvalue()


def judge(code: int, stderr: str) -> str:
    """'answer', 'refused' or the kind of finding."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if "Traceback" in stderr:
        return "traceback"
    if code == 70:
        return "memory" if "MemoryError" in stderr else "internal error"
    if code == 0:
        return "answer"
    if code != 2:
        return f"exit {code}"
    if len([line for line in lines if not line.startswith("canopy: warning")]) != 1:
        return "not one line"
    return "refused"


class Hang(BaseException):
    """A reader ran past HANG_SECONDS of CPU (raised by the worker's profiling timer)."""


def _alarm(signum: int, frame: object) -> None:
    raise Hang


def _worker(name: str, seed: int, count: int, workdir: str, state: str,
            results: multiprocessing.Queue) -> None:
    """Fuzz one format in this process (its memory capped); one result per input."""
    from canopy.engine.process.lifetime import die_with_parent
    die_with_parent()
    os.environ["CANOPY_LOG"] = str(Path(workdir) / "canopy.log")
    fmt = formats(Path(workdir))[name]
    assert fmt.seeds       # written now, before the memory cap and the watchdog
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_BYTES, resource.RLIM_INFINITY))
    signal.signal(signal.SIGPROF, _alarm)
    rng = random.Random(seed)
    results.put("ready")      # the seeds are written: the watchdog starts now
    for i in range(count):
        data, how, path = fmt.draw(rng, i, workdir)
        Path(state).write_text(json.dumps({"i": i, "how": how, "path": str(path)}))
        start = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, HANG_SECONDS)
        try:
            code, stderr = run_in_process(fmt, str(path))
            outcome = judge(code, stderr)
        except Hang:
            code, stderr, outcome = -1, "", "hang"
        except BaseException as exc:   # escaped main(): a finding  # noqa: BLE001
            code, stderr, outcome = -1, f"{exc.__class__.__name__}: {exc}", "escaped"
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        results.put((i, outcome, code, stderr[-400:], how, time.process_time() - start,
                     None if outcome in ("answer", "refused") else
                     base64.b64encode(data).decode()))
    results.put(None)


def fuzz_format(name: str, seed: int, count: int, keep: Path | None) -> dict[str, object]:
    """Fuzz one format with ``count`` inputs; restart the worker after a crash or hang."""
    outcomes: Counter[str] = Counter()
    findings: list[dict[str, object]] = []
    cpu = 0.0
    done = 0
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="canopy-fuzz-") as workdir:
        state = str(Path(workdir) / "state.json")
        while done < count:
            results: multiprocessing.Queue = ctx.Queue()
            proc = ctx.Process(target=_worker, args=(name, seed * 1_000_003 + done,
                                                     count - done, workdir, state, results))
            proc.start()
            last, last_cpu, ready = time.monotonic(), 0.0, False
            while True:
                try:
                    item = results.get(timeout=1.0)
                except Exception:  # queue.Empty
                    # before "ready" the worker writes its seeds (solves: slow when starved)
                    if not proc.is_alive() or (ready and (
                            _cpu_seconds(proc.pid) - last_cpu > 3 * HANG_SECONDS
                            or time.monotonic() - last > STALL_SECONDS)):
                        proc.kill()
                        proc.join()
                        lost = json.loads(Path(state).read_text()) \
                            if Path(state).exists() else {"how": "?", "path": ""}
                        data = Path(lost["path"]).read_bytes() \
                            if lost["path"] and Path(lost["path"]).exists() else b""
                        kind = "hang" if proc.exitcode == -signal.SIGKILL else \
                            f"worker died ({proc.exitcode})"
                        outcomes[kind] += 1
                        findings.append({"format": name, "outcome": kind, "how": lost["how"],
                                         "input": _kept(keep, name, len(findings),
                                                        base64.b64encode(data).decode())})
                        done += 1
                        break
                    continue
                last, last_cpu = time.monotonic(), _cpu_seconds(proc.pid)
                if item == "ready":
                    ready = True
                    continue
                if item is None:
                    proc.join()
                    break
                i, outcome, code, stderr, how, seconds, data = item
                done += 1
                cpu += seconds
                outcomes[outcome] += 1
                if data is not None and len(findings) < MAX_KEPT:
                    findings.append({"format": name, "outcome": outcome, "code": code,
                                     "stderr": stderr, "how": how,
                                     "input": _kept(keep, name, len(findings), data)})
            if Path(state).exists():
                Path(state).unlink()
    return {"inputs": done, "outcomes": dict(outcomes), "cpu_seconds": round(cpu, 1),
            "findings": findings}


def _cpu_seconds(pid: int | None) -> float:
    """User and system CPU seconds of process ``pid`` so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kept(keep: Path | None, name: str, n: int, data: str) -> str | None:
    if keep is None or not data:
        return None
    keep.mkdir(parents=True, exist_ok=True)
    path = keep / f"{name}-{os.getpid()}-{n}.bin"
    path.write_bytes(base64.b64decode(data))
    return str(path)


def cli_sample(name: str, seed: int, count: int) -> dict[str, object]:
    """``count`` mutated inputs through the real command; its exit code must match."""
    rng = random.Random(seed)
    mismatches: list[dict[str, object]] = []
    outcomes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="canopy-fuzz-cli-") as workdir:
        os.environ["CANOPY_LOG"] = str(Path(workdir) / "canopy.log")
        fmt = formats(Path(workdir))[name]
        for i in range(count):
            data, how, path = fmt.draw(rng, i, workdir)
            expected = judge(*run_in_process(fmt, str(path)))
            if fmt.argv is None:
                outcomes[expected] += 1
                continue
            proc = subprocess.run([sys.executable, "-m", "canopy.cli", *fmt.argv(str(path))],
                                  capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "CANOPY_LOG": os.environ["CANOPY_LOG"]})
            got = judge(proc.returncode, proc.stderr)
            outcomes[got] += 1
            if got != expected:
                mismatches.append({"how": how, "in_process": expected, "cli": got,
                                   "stderr": proc.stderr[-300:]})
    return {"inputs": sum(outcomes.values()), "outcomes": dict(outcomes),
            "mismatches": mismatches}


def merge(paths: list[str]) -> dict[str, object]:
    """One summary of several runs' summaries."""
    total: dict[str, dict[str, object]] = {}
    for p in paths:
        for name, part in json.loads(Path(p).read_text())["formats"].items():
            into = total.setdefault(name, {"inputs": 0, "outcomes": Counter(),
                                           "cpu_seconds": 0.0, "findings": []})
            into["inputs"] += part["inputs"]
            into["outcomes"].update(part["outcomes"])
            into["cpu_seconds"] = round(into["cpu_seconds"] + part["cpu_seconds"], 1)
            into["findings"] += part["findings"]
    return {"runs": paths, "inputs": sum(p["inputs"] for p in total.values()),
            "formats": {n: {**p, "outcomes": dict(p["outcomes"])} for n, p in total.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="inputs per format")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--formats", default=None, help="comma-separated (default: all)")
    parser.add_argument("--cli", type=int, default=5,
                        help="inputs per format also run through the real command")
    parser.add_argument("--keep", type=Path, default=None,
                        help="folder to keep the inputs of findings in")
    parser.add_argument("--merge", nargs="+", help="merge summaries instead of fuzzing")
    args = parser.parse_args()
    if args.merge:
        print(json.dumps(merge(args.merge), indent=1))
        return
    with tempfile.TemporaryDirectory() as scratch:
        known = list(formats(Path(scratch)))
    names = args.formats.split(",") if args.formats else known
    unknown = [name for name in names if name not in known]
    if unknown:       # each would count as a worker that died, a finding that is not one
        parser.error(f"no format {', '.join(unknown)}; the formats are {', '.join(known)}")
    start = time.monotonic()
    out: dict[str, object] = {"seed": args.seed, "count_per_format": args.count,
                              "formats": {}, "cli": {}}
    for name in names:
        out["formats"][name] = fuzz_format(name, args.seed, args.count, args.keep)
        if args.cli:
            out["cli"][name] = cli_sample(name, args.seed + 7, args.cli)
        print(f"{name}: {out['formats'][name]['outcomes']}", file=sys.stderr)
    out["inputs"] = sum(f["inputs"] for f in out["formats"].values())
    out["findings"] = sum(len(f["findings"]) for f in out["formats"].values())
    out["wall_seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
