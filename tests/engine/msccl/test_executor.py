"""Canopy's MSCCL simulator: hand-written programs run, hand-broken ones are caught."""

import re

import pytest
from lxml import etree

from canopy.engine.msccl import MscclLimits, MscclOptions, msccl_xml
from canopy.engine.msccl.executor import MscclXmlError, describe, simulate_bytes
from tests.engine.msccl.test_writer import star_schedule

STEP = ("type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


def algo_xml(coll, nchunks, gpus, inplace=1, outofplace=0, nchannels=1, ngpus=None):
    """gpus: [(i_chunks, o_chunks, s_chunks, [(send, recv, chan, [step tuples])])]."""
    algo = etree.Element("algo", name="hand", proto="Simple", nchannels=str(nchannels),
                         nchunksperloop=str(nchunks), ngpus=str(ngpus or len(gpus)),
                         coll=coll, inplace=str(inplace), outofplace=str(outofplace),
                         minBytes="0", maxBytes="1000")
    for gid, (i, o, s, tbs) in enumerate(gpus):
        gpu = etree.SubElement(algo, "gpu", id=str(gid), i_chunks=str(i), o_chunks=str(o),
                               s_chunks=str(s))
        for tid, (send, recv, chan, steps) in enumerate(tbs):
            tb = etree.SubElement(gpu, "tb", id=str(tid), send=str(send), recv=str(recv),
                                  chan=str(chan))
            for pos, step in enumerate(steps):
                full = (*step, *(None, None, None, None, None, 1, -1, -1, 0)[len(step):])
                etree.SubElement(tb, "step", s=str(pos),
                                 **{k: str(v) for k, v in zip(STEP, full, strict=True)})
    return etree.tostring(algo)


def two_gpu_allreduce(fused=False, out_of_place=False, **kw):
    """Each rank reduces its own chunk and sends the result back (msccl-tools style: both
    ends of a transfer name its source and destination slots)."""
    gpus = []
    for r in (0, 1):
        other = 1 - r
        res = "o" if out_of_place else "i"
        if fused:
            steps = [("s", "i", other, res, other), ("rrcs", "i", r, res, r),
                     ("r", "i", other, res, other)]
        else:
            steps = [("s", "i", other, res, other), ("rrc", "i", r, res, r),
                     ("s", res, r, res, r), ("r", res, other, res, other)]
        gpus.append((2, 2, 0, [(other, other, 0, steps)]))
    return algo_xml("allreduce", 2, gpus, **kw)


def two_gpu_allgather(copy=True, **kw):
    gpus = []
    for r in (0, 1):
        other = 1 - r
        steps = [("cpy", "i", 0, "o", r)] if copy else []
        steps += [("s", "i", 0, "o", r), ("r", "i", 0, "o", other)]
        gpus.append((1, 2, 0, [(other, other, 0, steps)]))
    return algo_xml("allgather", 2, gpus, **kw)


def error(data, **kw):
    with pytest.raises(MscclXmlError) as info:
        simulate_bytes(data, **kw)
    text = str(info.value)
    assert text.count("\n") == 0
    return text


# ---------------------------------------------------------------- programs written by hand


@pytest.mark.parametrize("fused", [False, True])
def test_hand_written_allreduce_runs_both_ways(fused):
    report = simulate_bytes(two_gpu_allreduce(fused, out_of_place=True, inplace=1,
                                              outofplace=1))
    assert report.modes == ["in place", "out of place"]
    assert report.messages == (4 if not fused else 4)
    assert "the result is correct" in report.summary()


def test_in_place_allgather_reads_its_input_through_the_output():
    assert simulate_bytes(two_gpu_allgather(copy=False)).modes == ["in place"]
    simulate_bytes(two_gpu_allgather(copy=True, inplace=1, outofplace=1))


def test_out_of_place_allgather_needs_its_own_chunk_copied():
    text = error(two_gpu_allgather(copy=False, inplace=0, outofplace=1))
    assert "after the allgather (out of place), rank 0's o[0] holds no data instead of " \
           "chunk 0 of rank 0" in text


@pytest.mark.parametrize("spelling", ["reduce_scatter", "reducescatter"])
def test_hand_written_reduce_scatter(spelling):
    gpus = []
    for r in (0, 1):
        other = 1 - r
        steps = [("s", "i", other, "o", 0), ("rrc", "i", r, "o", 0)]
        gpus.append((2, 1, 0, [(other, other, 0, steps)]))
    report = simulate_bytes(algo_xml(spelling, 2, gpus, inplace=1, outofplace=1))
    assert report.coll == "reduce_scatter" and len(report.modes) == 2


def test_a_connection_holding_one_message_can_deadlock_where_two_do_not():
    gpus = []
    for r in (0, 1):
        other = 1 - r
        steps = [("s", "o", 2 * r, "o", 2 * r), ("s", "o", 2 * r + 1, "o", 2 * r + 1),
                 ("r", "o", 2 * other, "o", 2 * other),
                 ("r", "o", 2 * other + 1, "o", 2 * other + 1)]
        gpus.append((2, 4, 0, [(other, other, 0, steps)]))
    data = algo_xml("allgather", 4, gpus)
    assert simulate_bytes(data, capacity=2).messages == 4
    text = error(data, capacity=1)
    assert text == ("MSCCL XML: deadlock (in place): rank 0 tb 0 step 1 waits for rank 1 tb 0 "
                    "step 1 waits for rank 0 tb 0 step 1.")


def test_describe_values():
    assert describe(None) == "no data"
    assert describe((3, 0b100)) == "chunk 3 of rank 2"
    assert describe((3, 0b101)) == "chunk 3 summed over ranks 0, 2"


# ---------------------------------------------------------------- hand-broken exports


def exported(collective, inplace=True):
    return etree.fromstring(msccl_xml(star_schedule(collective),
                                      options=MscclOptions(inplace=inplace, layout="compact")))


def steps_of(root):
    """(rank, tb element, step element) of every step."""
    for gpu in root.iter("gpu"):
        for tb in gpu.iter("tb"):
            for step in tb.iter("step"):
                yield int(gpu.get("id")), tb, step


def connection_steps(root, sender, receiver, chan, sending):
    """The steps on one side of a connection, in order, as (tb id, step)."""
    from canopy.engine.msccl.model import STEP_TYPES
    out = []
    rank = sender if sending else receiver
    peer, key = (receiver, "send") if sending else (sender, "recv")
    for gpu in root.iter("gpu"):
        if int(gpu.get("id")) != rank:
            continue
        for tb in gpu.iter("tb"):
            if int(tb.get(key)) == peer and int(tb.get("chan")) == chan:
                out += [(tb.get("id"), st) for st in tb.iter("step")
                        if getattr(STEP_TYPES[st.get("type")], "sends" if sending else "receives")]
    return out


def test_a_dropped_step_leaves_a_message_unmatched():
    root = exported("allgather")
    rank, tb, step = next((r, tb, st) for r, tb, st in steps_of(root)
                          if st.get("type") == "r" and st is tb.findall("step")[-1])
    sender, chan = int(tb.get("recv")), int(tb.get("chan"))
    tb.remove(step)
    sends = connection_steps(root, sender, rank, chan, sending=True)
    received = len(connection_steps(root, sender, rank, chan, sending=False))
    assert len(sends) == received + 1
    tid, extra = sends[-1]
    assert error(etree.tostring(root)) == (
        f"MSCCL XML: rank {sender} tb {tid} step {extra.get('s')} ({extra.get('type')}) sends "
        f"message {received + 1} to rank {rank} on channel {chan}, but rank {rank} receives "
        f"only {received} on that connection, so it is unmatched.")


def test_an_offset_beyond_the_buffer_is_caught():
    root = exported("allgather")
    rank, tb, step = next((r, tb, st) for r, tb, st in steps_of(root) if st.get("type") == "r")
    step.set("dstoff", "15")
    assert error(etree.tostring(root)) == (
        f"MSCCL XML: rank {rank} tb {tb.get('id')} step {step.get('s')} (r) dst "
        f"o[15:{15 + int(step.get('cnt'))}] is out of range of the 15 chunks o_chunks "
        "declares.")


def test_a_wrong_offset_inside_the_buffer_gives_a_wrong_result():
    root = exported("allgather")
    rank, tb, step = next((r, tb, st) for r, tb, st in steps_of(root)
                          if st.get("type") == "s" and st.get("depid") == "-1"
                          and st.get("cnt") == "1" and int(st.get("srcoff")) % 3 == 0)
    x = int(step.get("srcoff"))
    receiver, chan = int(tb.get("send")), int(tb.get("chan"))
    sends = connection_steps(root, rank, receiver, chan, sending=True)
    n = next(i for i, (_, st) in enumerate(sends) if st is step)
    _, received = connection_steps(root, rank, receiver, chan, sending=False)[n]
    for end in (step, received):            # both ends name the slot (msccl-tools)
        end.set("srcoff", str(x + 1))
    text = error(etree.tostring(root))
    assert re.fullmatch(
        rf"MSCCL XML: after the allgather \(in place\), rank \d+'s o\[{x}\] holds chunk "
        rf"{x + 1} of rank {rank} instead of chunk {x} of rank {rank}\.", text), text


@pytest.mark.parametrize("collective", ["allgather", "reduce-scatter"])
def test_a_missing_dependency_is_named(collective):
    root = exported(collective)
    rank, tb, step = next((r, tb, st) for r, tb, st in steps_of(root)
                          if st.get("depid") != "-1")
    step.set("depid", "-1")
    step.set("deps", "-1")
    text = error(etree.tostring(root))
    # the step that lost its dependency is named, as the reader or as the racing writer
    assert re.fullmatch(rf"MSCCL XML: rank {rank} tb \d+ step \d+ \(\w+, in place\) .*"
                        rf"rank {rank} tb {tb.get('id')} step {step.get('s')}\b.*"
                        r"\(a dependency is missing\)\.", text) or \
        text.startswith(f"MSCCL XML: rank {rank} tb {tb.get('id')} step {step.get('s')} "), text
    assert "a dependency is missing" in text


@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize("collective", ["reduce-scatter", "allreduce"])
def test_a_reduce_copy_where_a_reduce_send_belongs(collective, inplace):
    root = exported(collective, inplace)
    rank, tb, step = next((r, tb, st) for r, tb, st in steps_of(root)
                          if st.get("type") == "rrs")
    parent, chan = int(tb.get("send")), int(tb.get("chan"))
    sent = len(connection_steps(root, rank, parent, chan, sending=True))
    step.set("type", "rrc")
    tid, unmatched = connection_steps(root, rank, parent, chan, sending=False)[sent - 1]
    assert error(etree.tostring(root)) == (
        f"MSCCL XML: rank {parent} tb {tid} step {unmatched.get('s')} "
        f"({unmatched.get('type')}) receives message {sent} from rank {rank} on channel "
        f"{chan}, but rank {rank} sends only {sent - 1} on that connection, so it is "
        "unmatched.")


def test_a_dependency_that_is_never_signalled():
    root = exported("allgather")
    rank, tb, step = next((r, tb, st) for r, tb, st in steps_of(root)
                          if st.get("hasdep") == "1")
    step.set("hasdep", "0")
    text = error(etree.tostring(root))
    assert text.endswith(f"waits for rank {rank} tb {tb.get('id')} step {step.get('s')}, "
                         "which never signals its completion (no hasdep at or after it).")


def test_steps_in_the_wrong_order_deadlock():
    gpus = []
    for r in (0, 1):
        other = 1 - r
        gpus.append((1, 2, 0, [(other, other, 0, [("r", "i", 0, "o", other),
                                                  ("s", "i", 0, "o", r)])]))
    assert error(algo_xml("allgather", 2, gpus)) == (
        "MSCCL XML: deadlock (in place): rank 0 tb 0 step 0 waits for rank 1 tb 0 step 0 "
        "waits for rank 0 tb 0 step 0.")


# ---------------------------------------------------------------- data errors


def test_a_contribution_added_twice():
    gpus = []
    for r in (0, 1):
        other = 1 - r
        steps = [("s", "i", other, "i", other), ("rrc", "i", r, "i", r), ("re", "i", r, "i", r)]
        gpus.append((2, 1, 0, [(other, other, 0, steps)]))
    text = error(algo_xml("reduce_scatter", 2, gpus))
    assert text == ("MSCCL XML: rank 1 tb 0 step 2 (re, in place) adds the contribution of "
                    "ranks 0, 1 to chunk 1 twice.")


def test_chunks_of_different_indexes_are_not_added():
    gpus = []
    for r in (0, 1):
        other = 1 - r
        steps = [("s", "i", other, "s", 0), ("r", "i", r, "s", 0), ("re", "s", 0, "i", other)]
        gpus.append((2, 1, 1, [(other, other, 0, steps)]))
    assert "rank 1 tb 0 step 2 (re, in place) adds chunk 1 to chunk 0; reductions must " \
           "combine the same chunk" in \
        error(algo_xml("reduce_scatter", 2, gpus))


def test_out_of_place_must_not_write_the_input():
    data = two_gpu_allreduce(out_of_place=False, inplace=0, outofplace=1)
    assert error(data) == ("MSCCL XML: rank 1 tb 0 step 1 (rrc, out of place) writes the "
                           "input buffer i[1:2], which an out-of-place collective must leave "
                           "unchanged.")


def test_reading_a_slot_nothing_writes():
    gpus = []
    for r in (0, 1):
        other = 1 - r
        gpus.append((1, 2, 0, [(other, other, 0, [("s", "o", other, "o", r),
                                                  ("r", "o", r, "o", other)])]))
    assert error(algo_xml("allgather", 2, gpus)) == (
        "MSCCL XML: rank 0 tb 0 step 0 (s, in place) reads o[1] before anything is written "
        "there; no other step writes it (an offset is wrong or a step is missing).")


def test_a_receive_of_the_wrong_size():
    gpus = []
    for r in (0, 1):
        other = 1 - r
        gpus.append((1, 2, 0, [(other, other, 0, [("s", "i", 0, "o", 0, 1),
                                                  ("r", "i", 0, "o", 0, 2)])]))
    assert "rank 1 tb 0 step 1 (r, in place) receives 2 chunk(s) but rank 0 tb 0 step 0 " \
           "sent 1" in \
        error(algo_xml("allgather", 2, gpus))


# ---------------------------------------------------------------- what the runtime rejects


def mutate(data, path, **attrs):
    root = etree.fromstring(data)
    elem = root.xpath(path)[0]
    for key, value in attrs.items():
        if value is None:
            del elem.attrib[key]
        else:
            elem.set(key, str(value))
    return etree.tostring(root)


BASE = two_gpu_allreduce()
REJECTED = {
    "missing attribute": (mutate(BASE, "//step", cnt=None),
                          "rank 0 tb 0 step 0: <step> has no 'cnt' attribute"),
    "not an integer": (mutate(BASE, "//step", srcoff="x"), "'srcoff' is 'x', not an integer"),
    "collective": (mutate(BASE, "/algo", coll="broadcast"),
                   "coll 'broadcast' is not allgather, reduce_scatter, allreduce or alltoall"),
    "protocol": (mutate(BASE, "/algo", proto="Fast"), "proto 'Fast' is not one of"),
    "no mode": (mutate(BASE, "/algo", inplace=0), "neither inplace nor outofplace is 1"),
    "gpu ids": (mutate(BASE, "//gpu[2]", id=5), "the <gpu> ids are [0, 5], not 0 to 1"),
    "tb ids": (mutate(BASE, "//tb", id=3), "rank 0: thread block ids are [3], not 0, 1, 2"),
    "self peer": (mutate(BASE, "//tb", send=0), "rank 0 tb 0: send peer 0 is not another rank"),
    "channel": (mutate(BASE, "//tb", chan=1), "channel 1 is outside 0 to nchannels-1 = 0"),
    "numbering": (mutate(BASE, "//step[2]", s=5), "rank 0 tb 0 step 1 is numbered s=5"),
    "step type": (mutate(BASE, "//step", type="xyz"), "step type 'xyz' is not one of"),
    "buffer": (mutate(BASE, "//step", srcbuf="q"), "buffer 'q' is not i, o or s"),
    "cnt": (mutate(BASE, "//step", cnt=72), "cnt is 72; MSCCL allows 1 to 71"),
    "depid": (mutate(BASE, "//step[2]", depid=4, deps=0), "depends on tb 4, which rank 0"),
    "deps": (mutate(BASE, "//step[2]", depid=0, deps=9), "depends on step 9 of tb 0"),
    "hasdep": (mutate(BASE, "//step", hasdep=2), "hasdep must be 0 or 1"),
    "half dependency": (mutate(BASE, "//step", deps=0),
                        "rank 0 tb 0 step 0 has depid -1 but deps 0; a dependency names both"),
    "nop rule": (mutate(mutate(BASE, "//step", type="nop", depid=0, deps=3), "//step[2]"),
                 "follows nop steps with dependencies but has none itself"),
    "channels": (mutate(BASE, "/algo", nchannels=33), "nchannels is 33; MSCCL allows 1 to 32"),
    "chunks": (mutate(BASE, "/algo", nchunksperloop=3, coll="allgather"),
               "nchunksperloop 3 is not a multiple of ngpus 2"),
    "top": (b"<algorithm/>", "the top element is <algorithm>, not <algo>"),
    "no send peer": (mutate(BASE, "//tb", send=-1), "(s) sends, but its thread block has no "
                                                    "send peer"),
}


@pytest.mark.parametrize("case", REJECTED)
def test_what_the_runtime_rejects(case):
    data, expected = REJECTED[case]
    assert expected in error(data)


def test_two_thread_blocks_on_one_connection():
    steps = [("s", "i", 0, "o", 0)]
    gpus = [(1, 2, 0, [(1, -1, 0, steps), (1, -1, 0, steps)]), (1, 2, 0, [])]
    assert "rank 0 tb 1 and tb 0 both send to rank 1 on channel 0; a connection belongs to " \
           "one thread block" in error(algo_xml("allgather", 2, gpus))


def test_the_runtime_limits_are_enforced():
    long_tb = [("cpy", "i", 0, "o", 0)] * 5
    data = algo_xml("allgather", 2, [(1, 2, 0, [(-1, -1, 0, long_tb)])] * 2)
    assert "has 5 steps; MSCCL allows 4" in error(data, limits=MscclLimits(max_steps_per_tb=4))
    assert "rank 0 has 9 XML elements (with the <algo> and all 2 <gpu> elements); the " \
        "runtime's parser holds 8 per GPU" in error(data, limits=MscclLimits(
            max_elements_per_gpu=8))
    assert "rank 0 has 9 XML elements" not in error(data, limits=MscclLimits(
        max_steps_per_tb=4, max_elements_per_gpu=9))
    many = algo_xml("allgather", 2, [(1, 2, 0, [(-1, -1, 0, long_tb[:1])] * 3)] * 2)
    assert "more than 2 thread blocks on channel 0" in \
        error(many, limits=MscclLimits(max_tbs_per_channel=2))
    assert "rank 0 has 3 thread blocks; they must all be resident at once, and the GPU " \
        "has 2 SMs" in error(many, limits=MscclLimits(max_tbs_per_gpu=2))


# ---------------------------------------------------------------- the msccl-tools convention


def test_both_ends_of_a_transfer_name_the_same_slots():
    data = mutate(two_gpu_allgather(copy=False), "//gpu[2]//step[2]", srcbuf="o")
    assert error(data) == (
        "MSCCL XML: message 1 from rank 0 to rank 1 on channel 0 is sent by rank 0 tb 0 step 0 "
        "(s) as src i[0] dst o[0] but received by rank 1 tb 0 step 1 (r) as src o[0] dst "
        "o[0]; both ends of a transfer must name the same slots.")


def test_an_rcs_step_names_one_slot():
    """Out of place, relaying a root's chunk straight from its input, as Canopy once did."""
    chain = [[(1, -1, 0, [("s", "i", 0, "o", 0)])],
             [(2, 0, 0, [("rcs", "i", 0, "o", 0)])],
             [(-1, 1, 0, [("r", "i", 0, "o", 0)])]]
    data = algo_xml("allgather", 3, [(1, 3, 0, tbs) for tbs in chain], inplace=0, outofplace=1)
    assert error(data) == (
        "MSCCL XML: rank 1 tb 0 step 0 (rcs) names src i[0] and dst o[0]; an rcs step "
        "receives and forwards one slot, so src and dst must be the same buffer and offset.")
