"""Small execution plans written by hand in the runtime's format (from the rules of
microsoft/mscclpp's parser and kernels, as the reader and executor document them), one
per kind of operation the runtime's own example plans use: memory-channel puts, reads
and reductions with signals and waits, port-channel puts, puts with signal and flushes,
packets (LL), copies and semaphores between thread blocks. check-plan accepts each, and
refuses each mutated version with one sentence naming the GPU, thread block and op."""

import copy
import json

import pytest

from canopy.cli import main
from canopy.engine.mscclpp.executor import execute
from canopy.engine.mscclpp.reader import MscclppPlanError, parse_plan

WHERE = r"GPU \d+ thread block \d+ op \d+"


def local(buf, index, size=1):
    return {"type": buf, "index": index, "size": size}


def remote(bid, index, size=1):
    return {"buffer_id": bid, "index": index, "size": size}


def sync(name, kind, ids=(0,)):
    return {"name": name, "channel_ids": list(ids), "channel_type": kind}


NOP = {"name": "nop"}


def threadblock(tid, ops, channels=(), buffers=()):
    return {"id": tid, "ops": ops,
            "channels": [{"channel_type": k, "channel_ids": ids} for k, ids in channels],
            "remote_buffer_refs": [{"access_channel_type": k, "remote_buffer_ids": ids}
                                   for k, ids in buffers]}


def gpu(r, chunks, kind, remotes, tbs, semaphores=0):
    i, o, s = chunks
    return {"id": r, "input_chunks": i, "output_chunks": o, "scratch_chunks": s,
            "channels": [{"channel_type": kind, "connected_to": [1 - r]}],
            "remote_buffers": [{"rank": 1 - r, "type": b, "access_channel_types": [kind]}
                               for b in remotes],
            "semaphores": [{"init_value": 0}] * semaphores, "threadblocks": tbs}


def plan(name, collective, gpus, protocol="Simple"):
    return {"name": name, "collective": collective, "protocol": protocol, "inplace": False,
            "gpus": gpus, "num_threads_per_block": 1024, "min_message_size": 0,
            "max_message_size": 2**64 - 1}


def read_reduce_allreduce():
    """Two GPUs of one server, allreduce of two chunks: each says its input is there
    (``rlxsignal``, which orders no writes), waits for the peer's, reads and adds the
    peer's chunk r to its own (``rres``) and writes the sum to both outputs, then signals
    (ordering that write) and waits for the peer's sum."""
    return plan("read-reduce", "allreduce", [gpu(r, (2, 2, 0), "memory", ["i", "o"], [
        threadblock(0, [
            sync("rlxsignal", "memory"), sync("rlxwait", "memory"), NOP,
            {"name": "rres", "src_buff": [local("i", r), remote(0, r)],
             "dst_buff": [local("o", r), remote(1, r)], "channel_type": "memory",
             "reduce_op": "sum"},
            NOP, sync("signal", "memory"), sync("wait", "memory")],
            [("memory", [0])], [("memory", [0, 1])])]) for r in (0, 1)])


def put_reduce_allreduce():
    """Two GPUs of one server, allreduce of two chunks: each puts the peer's chunk of its
    input into the peer's scratch and signals; after the peer's signal it adds that
    scratch chunk to its own chunk (``re``), puts the sum into the peer's output and
    signals again."""
    return plan("put-reduce", "allreduce", [gpu(r, (2, 2, 2), "memory", ["s", "o"], [
        threadblock(0, [
            {"name": "put", "src_buff": [local("i", 1 - r)], "dst_buff": [remote(0, 0)],
             "channel_type": "memory"},
            NOP, sync("signal", "memory"), sync("wait", "memory"), NOP,
            {"name": "re", "src_buff": [local("i", r), local("s", 0)],
             "dst_buff": [local("o", r)], "reduce_op": "sum"},
            NOP,
            {"name": "put", "src_buff": [local("o", r)], "dst_buff": [remote(1, r)],
             "channel_type": "memory"},
            NOP, sync("signal", "memory"), sync("wait", "memory")],
            [("memory", [0])], [("memory", [0, 1])])]) for r in (0, 1)])


def port_allgather():
    """Two GPUs in two servers, allgather of two chunks a GPU over a port channel: its
    own chunks copied into place, chunk 0 put then signalled, chunk 1 put with its signal
    (``pws``), the proxy flushed, and one wait per signal of the peer."""
    def ops(r):
        return [
            {"name": "copy", "src_buff": [local("i", 0, 2)], "dst_buff": [local("o", 2 * r, 2)]},
            {"name": "put", "src_buff": [local("i", 0)], "dst_buff": [remote(0, 2 * r)],
             "channel_type": "port", "channel_ids": [0]},
            NOP, sync("signal", "port"),
            {"name": "pws", "src_buff": [local("i", 1)], "dst_buff": [remote(0, 2 * r + 1)],
             "channel_type": "port", "channel_ids": [0]},
            NOP, sync("flush", "port"), sync("wait", "port"), sync("wait", "port"), NOP]
    return plan("port", "allgather", [
        gpu(r, (2, 4, 0), "port", ["o"], [threadblock(0, ops(r), [("port", [0])],
                                                      [("port", [0])])]) for r in (0, 1)])


def packet_reduce_scatter():
    """Two GPUs, reduce-scatter in packets (LL): thread block 0 writes the peer's chunk
    as packets into the peer's scratch (``ppkt``: their flags make them visible without a
    signal); thread block 1 copies its own chunk into scratch and releases a semaphore;
    thread block 2 acquires it and adds the peer's packets to that copy (``repkt``)."""
    def tbs(r):
        return [
            threadblock(0, [{"name": "ppkt", "src_buff": [local("i", 1 - r)],
                             "dst_buff": [remote(0, 0)], "channel_type": "memory"}],
                        [("memory", [0])], [("memory", [0])]),
            threadblock(1, [{"name": "copy", "src_buff": [local("i", r)],
                             "dst_buff": [local("s", 1)]},
                            NOP, {"name": "sem_release", "semaphore_ids": [0]}]),
            threadblock(2, [{"name": "sem_acquire", "semaphore_ids": [0]}, NOP,
                            {"name": "repkt", "src_buff": [local("s", 1), local("s", 0)],
                             "dst_buff": [local("o", 0)], "reduce_op": "sum"}])]
    return plan("packets", "reducescatter",
                [gpu(r, (2, 1, 2), "memory", ["s"], tbs(r), semaphores=1) for r in (0, 1)],
                protocol="LL")


PLANS = {"read-reduce": read_reduce_allreduce, "put-reduce": put_reduce_allreduce,
         "port": port_allgather, "packets": packet_reduce_scatter}


def ops(p, g=0, t=0):
    return p["gpus"][g]["threadblocks"][t]["ops"]


def named(p, name, g=0, t=0):
    return next(n for n, op in enumerate(ops(p, g, t)) if op["name"] == name)


def drop(name, g=0, t=0):
    def edit(p):
        del ops(p, g, t)[named(p, name, g, t)]
    return edit


def wrong_slot(p):
    ops(p)[named(p, "put")]["dst_buff"][0]["index"] = 1      # a scratch slot nobody reads


def swap_put_and_signal(p):
    a, b = named(p, "put"), named(p, "signal")
    ops(p)[a], ops(p)[b] = ops(p)[b], ops(p)[a]


MUTATIONS = [
    ("read-reduce", drop("rlxwait"), "never waits"),   # its wait now takes the ready signal
    ("read-reduce", drop("wait", g=1), ""),
    ("put-reduce", drop("wait"), ""),
    ("put-reduce", wrong_slot, ""),
    ("put-reduce", swap_put_and_signal, ""),
    ("port", drop("signal"), "signal"),
    ("port", drop("pws", g=1), ""),
    ("packets", drop("ppkt"), "packets"),
    ("packets", drop("sem_release", t=1), "semaphore"),
]


@pytest.mark.parametrize("name", PLANS)
def test_hand_written_plans_pass_check_plan(tmp_path, capsys, name):
    p = PLANS[name]()
    assert execute(parse_plan(json.loads(json.dumps(p)), name)).checked
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(p))
    assert main(["check-plan", str(path)]) == 0
    assert "result correct" in capsys.readouterr().out


@pytest.mark.parametrize("name, edit, word", MUTATIONS,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MUTATIONS)])
def test_mutated_hand_written_plans_are_refused(tmp_path, capsys, name, edit, word):
    p = copy.deepcopy(PLANS[name]())
    edit(p)
    with pytest.raises(MscclppPlanError, match=WHERE) as info:
        execute(parse_plan(json.loads(json.dumps(p)), name))
    text = str(info.value)
    assert text.endswith(".") and ". " not in text and word in text, text
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(p))
    assert main(["check-plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
