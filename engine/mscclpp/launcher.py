"""The launcher written beside an MSCCL++ plan, and the command that runs it.

MSCCL++ (github:microsoft/mscclpp, ``docs/dsl/integration.md``) runs a plan for programs
that keep calling NCCL through its NCCL interposition library (``LD_PRELOAD`` of
``libmscclpp_nccl.so``): before the process group starts, each process registers the plan
(``mscclpp.ExecutionPlan(path, rank)`` wrapped in ``mscclpp.Algorithm``) with
``mscclpp.ext.AlgorithmCollectionBuilder`` and a selector that picks it for its
collective and message-size range (the interposition library asks the selector first and
falls back to NCCL where it returns nothing). The launcher does exactly that and then runs
the collective once as a smoke test (or imports the user's training script with
``--script``), under ``torchrun``.
"""

from __future__ import annotations

import json
import os
import shlex

LAUNCHER_TEMPLATE = '''#!/usr/bin/env python3
"""Run Canopy's MSCCL++ plan(s) through MSCCL++'s NCCL interposition (written by Canopy).

  LD_PRELOAD=$MSCCLPP_BUILD/lib/libmscclpp_nccl.so torchrun --nnodes=N --nproc_per_node=G \\\\
      THIS_FILE [--script train.py]

Each process registers the plans for their collective and size range; NCCL calls the
selector does not claim (other sizes, sizes that are not a multiple of 16 bytes times a
plan's chunks, which the runtime refuses, and sizes whose buffers reach 4 GiB, past the
runtime's 32-bit offsets) go to NCCL (set MSCCLPP_NCCL_LIB_PATH to
NCCL's library).
"""
import argparse
import json
import os
import runpy

import mscclpp
import mscclpp.ext
import torch
import torch.distributed as dist

PLANS = {plans}
COLLECTIVE = {collective!r}
HERE = os.path.dirname(os.path.abspath(__file__))


def runtime_accepts(meta, rank, world, collective, size):
    """Whether the runtime takes a message of ``size`` bytes (the output for allgather):
    its input and output must be multiples of the alignment times their chunks, else
    the executor throws (checkMessageSize); and every byte offset of the plan's buffers
    must stay below 4 GiB, which the runtime keeps in 32 bits without a check (the same
    answer on every rank: the most chunks of any GPU's buffer). Such sizes are left to
    NCCL."""
    gpu = meta["gpus"][rank]
    ins, outs = {{"allgather": (size // world, size),
                 "reducescatter": (size, size // world)}}.get(collective, (size, size))
    align = meta.get("buffer_alignment", 16)
    if not all(b % align == 0 and (not chunks or (b // align) % chunks == 0)
               for b, chunks in ((ins, gpu["input_chunks"]), (outs, gpu["output_chunks"]))):
        return False
    chunk = ins // gpu["input_chunks"] if gpu["input_chunks"] else outs // gpu["output_chunks"]
    most = max(max(g["input_chunks"], g["output_chunks"], g["scratch_chunks"])
               for g in meta["gpus"])
    return chunk * most < 1 << 32


def register(rank, world, per_node):
    builder = mscclpp.ext.AlgorithmCollectionBuilder()
    ranges = []
    for path in PLANS:
        full = path if os.path.isabs(path) else os.path.join(HERE, path)
        with open(full) as f:
            meta = json.load(f)
        if len(meta["gpus"]) != world:
            raise SystemExit(f"{{full}} is a plan for {{len(meta['gpus'])}} GPUs, not {{world}}")
        plan = mscclpp.ExecutionPlan(full, rank)
        algo = mscclpp.Algorithm(id=meta["name"], execution_plan=plan,
                                 constraint=mscclpp.Algorithm.Constraint(world, per_node))
        builder.add_algorithm_builder(algo)
        ranges.append((meta["min_message_size"], meta["max_message_size"], meta["name"],
                       meta["collective"], meta))

    def selector(algorithms, req):
        # allgather requests carry the bytes each rank sends; plans name the whole output
        size = req.message_size * (world if req.collective == "allgather" else 1)
        for low, high, name, collective, meta in ranges:
            if req.collective == collective and low <= size <= high and \
                    runtime_accepts(meta, rank, world, collective, size):
                return algorithms[collective][name]
        return None

    builder.set_algorithm_selector(selector)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", help="run this training script after registering")
    parser.add_argument("--size", type=int, default=1 << 30, help="smoke-test bytes")
    args, rest = parser.parse_known_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    register(rank, world, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    if args.script:
        import sys
        sys.argv = [args.script, *rest]
        runpy.run_path(args.script, run_name="__main__")
        return
    torch.cuda.set_device(local)
    dist.init_process_group(backend="nccl", device_id=torch.device("cuda", local))
    count = args.size // 4
    if COLLECTIVE == "allreduce":
        x = torch.ones(count, device="cuda")
        dist.all_reduce(x)
        ok = bool(torch.all(x == world))
    elif COLLECTIVE == "allgather":
        out = torch.empty(count, device="cuda")
        dist.all_gather_into_tensor(out, torch.full((count // world,), float(rank),
                                                    device="cuda"))
        ok = bool(torch.all(out.view(world, -1)[:, 0] == torch.arange(world, device="cuda")))
    elif COLLECTIVE == "reducescatter":
        out = torch.empty(count // world, device="cuda")
        dist.reduce_scatter_tensor(out, torch.ones(count, device="cuda"))
        ok = bool(torch.all(out == world))
    else:
        inp = torch.full((count,), float(rank), device="cuda")
        out = torch.empty(count, device="cuda")
        dist.all_to_all_single(out, inp)
        ok = bool(torch.all(out.view(world, -1)[:, 0] == torch.arange(world, device="cuda")))
    dist.barrier()
    print(f"rank {{rank}}: {{COLLECTIVE}} of {{args.size}} bytes {{'correct' if ok else 'WRONG'}}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''

NAMES = {"allgather": "allgather", "reduce-scatter": "reducescatter",
         "allreduce": "allreduce", "alltoall": "alltoall", "reducescatter": "reducescatter"}


def launcher_path(plan_path: str | os.PathLike[str]) -> str:
    """``PLAN-run.py`` beside ``PLAN.json``."""
    text = os.fspath(plan_path)
    stem = text[:-5] if text.lower().endswith(".json") else text
    return f"{stem}-run.py"


def launcher_script(plan_paths: list[str], collective: str, inplace: bool) -> bytes:
    """The launcher's Python source for ``plan_paths`` (named relative to its folder)."""
    del inplace                     # each plan names its own buffer mode
    base = os.path.dirname(os.path.abspath(plan_paths[-1]))
    names = [os.path.relpath(os.path.abspath(p), base) for p in plan_paths]
    return LAUNCHER_TEMPLATE.format(plans=json.dumps(names),
                                    collective=NAMES.get(collective, collective)).encode()


def run_text(script: str, ngpus: int, per_server: int) -> str:
    """The command that runs ``script`` on the cluster."""
    nodes = max(1, ngpus // max(per_server, 1))
    return ("Run on every server (MSCCLPP_BUILD: MSCCL++'s build folder; ranks of one server "
            "consecutive):\n"
            f"  LD_PRELOAD=$MSCCLPP_BUILD/lib/libmscclpp_nccl.so torchrun --nnodes={nodes} "
            f"--nproc_per_node={per_server} --node_rank=$NODE_RANK "
            f"--master_addr=$MASTER_ADDR --master_port=29500 {shlex.quote(script)}")
