"""Canopy's MSCCL exports run through an independent MSCCL XML verifier; print JSON.

The verifier is dromniscience/MSCCL-XML-Verifier (C++, not part of Canopy and not copied
here): it runs every thread block of an out-of-place ``allgather`` (or ``alltoall``) XML
as a CPU thread over FIFO mailboxes per (sender, receiver, channel), checks the
msccl-tools slot convention on every message (the receiving step names the sender's
src/dst slots and count; ``rcs`` names one slot), counts in 1..71, step order, the
runtime's 4096 XML elements per GPU, and finally the output buffers. Build it outside
this repository::

    git clone https://github.com/dromniscience/MSCCL-XML-Verifier /tmp/verifier
    cmake -S /tmp/verifier -B /tmp/verifier/build && make -C /tmp/verifier/build

Run: ``python bench/external_verifier.py --verifier-dir /tmp/verifier/build
[--sample NAME] [--iters 3] [--alltoall NAME ...]``. For every sample (or those named)
it exports the default out-of-place allgather XML (``canopy solve --msccl --out-of-place``)
and, for the ``--alltoall`` samples, the all-to-all XML, runs ``allgather-verifier`` /
``alltoall-verifier`` on it and prints one row per run: sample, collective, accepted,
the verifier's message (its error, or its last line) and CPU seconds of the export.

``alltoall-verifier`` only takes ``coll="allreduce"`` ("Not typo, required by CCF test", its
source says), so the all-to-all XML it is given names that collective; nothing else of the
file is changed. The runtime itself reads Canopy's ``coll="alltoall"``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from canopy.engine.alltoall import solve_alltoall
from canopy.engine.alltoall.msccl import alltoall_xml
from canopy.engine.deploy.runtime_choice import runtime_schedule
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.msccl import MscclOptions, plan_xml

DEFAULT_ALLTOALL = ("forestcoll-fig2", "mesh-2d-3x3", "hypercube-3d", "tacos-dragonfly-4x5")
TIMEOUT_S = 600


def out_of_place_allgather(topo) -> bytes:
    """What ``canopy solve TOPO --msccl OUT --out-of-place`` writes."""
    choice = runtime_schedule(topo, solve(topo, "allgather"))
    return plan_xml(choice.plan, choice.schedule.k, MscclOptions(inplace=False))


def as_ccf_alltoall(data: bytes) -> bytes:
    """The all-to-all XML as ``alltoall-verifier`` wants it: ``coll="allreduce"``."""
    marker = b'coll="alltoall"'
    assert data.count(marker) == 1, "an all-to-all XML names its collective once"
    return data.replace(marker, b'coll="allreduce"')


def verify(binary: Path, data: bytes, iters: int) -> tuple[bool, str]:
    """(accepted, message): run ``binary`` on ``data`` written to a temporary file."""
    with tempfile.NamedTemporaryFile(suffix=".xml", delete=False) as handle:
        handle.write(data)
        path = handle.name
    try:
        run = subprocess.run([str(binary), path, str(iters)], capture_output=True, text=True,
                             timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {TIMEOUT_S} s"
    finally:
        os.unlink(path)
    lines = [line for line in (run.stderr + "\n" + run.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if "rror" in line or "what()" in line]
    accepted = run.returncode == 0 and "All tests passed." in run.stdout
    message = (errors[0] if errors else lines[-1] if lines else "") if not accepted \
        else "All tests passed."
    return accepted, message.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verifier-dir", required=True, type=Path,
                        help="the verifier's build directory (holds allgather-verifier)")
    parser.add_argument("--sample", action="append", help="only this sample (repeatable)")
    parser.add_argument("--alltoall", nargs="*", default=list(DEFAULT_ALLTOALL),
                        help="samples whose all-to-all XML is verified too")
    parser.add_argument("--iters", type=int, default=3, help="runs of each XML (default 3)")
    args = parser.parse_args()
    binaries = {c: args.verifier_dir / f"{c}-verifier" for c in ("allgather", "alltoall")}
    missing = [str(b) for b in binaries.values() if not b.is_file()]
    if missing:
        print(f"error: {missing[0]} does not exist; build the verifier first (see --help).",
              file=sys.stderr)
        return 2
    rows = []
    for name in sample_names():
        sample = name.removesuffix(".json")
        if args.sample and sample not in args.sample:
            continue
        topo = load_sample(name)
        jobs = [("allgather", lambda t=topo: out_of_place_allgather(t))]
        if sample in args.alltoall:
            jobs.append(("alltoall", lambda t=topo: as_ccf_alltoall(
                alltoall_xml(solve_alltoall(t).schedule).data)))
        for collective, export in jobs:
            start = time.process_time()
            data = export()
            cpu = time.process_time() - start
            accepted, message = verify(binaries[collective], data, args.iters)
            rows.append({"sample": sample, "collective": collective, "accepted": accepted,
                         "message": message, "export_cpu_s": round(cpu, 3)})
            print(json.dumps(rows[-1]), file=sys.stderr)
    print(json.dumps({"verifier": str(args.verifier_dir), "iters": args.iters,
                      "accepted": sum(r["accepted"] for r in rows), "runs": len(rows),
                      "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
