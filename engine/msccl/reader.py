"""Reading an MSCCL XML file into the :mod:`~canopy.engine.msccl.model` classes.

The file is parsed safely (:mod:`canopy.engine.io.safe_xml`: no entities, no DTD, a size
limit) and every attribute the runtime's parser requires must be present and an integer
where it expects one (Canopy's optional ``via`` route of a thread block's send connection
is read too; the runtime ignores it); anything else is one :class:`MscclXmlError` sentence
naming the rank, thread block and step.
"""

from __future__ import annotations

import os

from lxml import etree

from canopy.engine.io.safe_xml import parse_xml_bytes, parse_xml_file
from canopy.engine.msccl.model import (
    COLLECTIVES,
    MscclXmlError,
    XmlAlgo,
    XmlGpu,
    XmlStep,
    XmlThreadBlock,
    where,
)


def _int(elem: etree._Element, key: str, at: str) -> int:
    value = elem.get(key)
    if value is None:
        raise MscclXmlError(f"{at}: <{elem.tag}> has no '{key}' attribute.")
    try:
        return int(value)
    except ValueError:
        raise MscclXmlError(f"{at}: '{key}' is '{value}', not an integer.") from None


def _str(elem: etree._Element, key: str, at: str) -> str:
    value = elem.get(key)
    if value is None:
        raise MscclXmlError(f"{at}: <{elem.tag}> has no '{key}' attribute.")
    return value


def _step(st: etree._Element, at: str) -> XmlStep:
    hasdep = _int(st, "hasdep", at)
    step = XmlStep(_int(st, "s", at), _str(st, "type", at), _str(st, "srcbuf", at),
                   _int(st, "srcoff", at), _str(st, "dstbuf", at), _int(st, "dstoff", at),
                   _int(st, "cnt", at), _int(st, "depid", at), _int(st, "deps", at),
                   hasdep == 1)
    if hasdep not in (0, 1):
        raise MscclXmlError(f"{at}: hasdep must be 0 or 1.")
    return step


def parse_msccl(root: etree._Element, source: str = "MSCCL XML") -> XmlAlgo:
    """The algorithm of an ``<algo>`` element (attributes as the runtime reads them)."""
    if root.tag != "algo":
        raise MscclXmlError(f"{source}: the top element is <{root.tag}>, not <algo>.")
    coll = _str(root, "coll", source)
    if coll not in COLLECTIVES:
        raise MscclXmlError(f"{source}: coll '{coll}' is not allgather, reduce_scatter, "
                            "allreduce or alltoall.")
    algo = XmlAlgo(_str(root, "name", source), _str(root, "proto", source),
                   _int(root, "nchannels", source), _int(root, "nchunksperloop", source),
                   _int(root, "ngpus", source), COLLECTIVES[coll],
                   bool(_int(root, "inplace", source)), bool(_int(root, "outofplace", source)),
                   [])
    algo.min_bytes, algo.max_bytes = (_int(root, key, source) for key in ("minBytes", "maxBytes"))
    for gpu_elem in root.iter("gpu"):
        gid = _int(gpu_elem, "id", source)
        at = f"{source}: {where(gid)}"
        gpu = XmlGpu(gid, _int(gpu_elem, "i_chunks", at), _int(gpu_elem, "o_chunks", at),
                     _int(gpu_elem, "s_chunks", at))
        for tb_elem in gpu_elem.iter("tb"):
            tid = _int(tb_elem, "id", at)
            tb_at = f"{source}: {where(gid, tid)}"
            tb = XmlThreadBlock(tid, _int(tb_elem, "send", tb_at),
                                _int(tb_elem, "recv", tb_at), _int(tb_elem, "chan", tb_at),
                                via=tuple(x for x in (tb_elem.get("via") or "").split(",")
                                          if x))
            for pos, st in enumerate(tb_elem.iter("step")):
                tb.steps.append(_step(st, f"{source}: {where(gid, tid, pos)}"))
            gpu.tbs.append(tb)
        algo.gpus.append(gpu)
    return algo


def read_msccl(path: str | os.PathLike[str]) -> XmlAlgo:
    """Parse an MSCCL XML file safely (no entities, no DTD, size limit)."""
    return parse_msccl(parse_xml_file(path), str(path))


def read_msccl_bytes(data: bytes, source: str = "MSCCL XML") -> XmlAlgo:
    """Parse an MSCCL XML document held in memory (safely)."""
    return parse_msccl(parse_xml_bytes(data, source), source)
