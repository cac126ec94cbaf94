"""The MSCCL files a user runs: one XML, or an XML per message-size range and a config.

:func:`canopy.engine.deploy.runtime_choice.runtime_schedule` may choose one schedule for large
messages and another for smaller ones (its ``below``, under ``boundary`` bytes). The MSCCL
runtimes load several algorithms and run, for each collective call, one whose size range
holds the call's bytes (the whole buffer: count times the GPUs for allgather and
reduce-scatter, as nccl-tests' sizes):

* microsoft/msccl reads ``MSCCL_CONFIG``, an XML ``<msccl_algos>`` whose ``<load path
  minbytes maxbytes proto>`` elements name each algorithm file and its range (``minbytes``
  included, ``maxbytes`` not; without ``maxbytes`` no upper end);
* RCCL and msccl-executor-nccl load every XML in ``MSCCL_ALGO_DIR`` and take one whose
  own ``<algo minBytes maxBytes>`` hold the size (both ends included).

So each XML carries its range in its ``<algo>`` (the lower one ends a byte before the
boundary) and, for microsoft/msccl, a config names both (:func:`wants_config`; not for
RCCL, which would read the config itself as an algorithm). The file the user named is
always written: it is the XML for the largest messages (the one a single-XML export would
hold), and the smaller messages' XML sits beside it. Where ``below`` is None the export is
the single XML it always was, for every size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from lxml import etree

from canopy.engine.deploy.runtime_choice import RuntimeChoice
from canopy.engine.model.sizes import size_label
from canopy.engine.msccl.options import MscclOptions
from canopy.engine.msccl.writer import plan_xml

UNBOUNDED = 2**63 - 1          # the writer's default maxBytes: no upper end


@dataclass(frozen=True)
class MscclFile:
    """One algorithm file: its path, XML, and the message sizes it runs (``max_bytes``
    excluded; None: no upper end)."""

    path: str
    data: bytes
    min_bytes: int = 0
    max_bytes: int | None = None

    def sizes_text(self) -> str:
        """'below 512M', '512M and above' or 'every size'."""
        if self.max_bytes is None:
            return "every size" if self.min_bytes == 0 else \
                f"{size_label(self.min_bytes)} and above"
        return f"below {size_label(self.max_bytes)}"


def wants_config(files: list[MscclFile], runtime: str) -> bool:
    """Whether the export also writes the config: several files, for microsoft/msccl."""
    return len(files) > 1 and runtime == "msccl"


def config_path(path: str | os.PathLike[str]) -> str:
    """Where the config beside the XMLs of ``path`` (the export's name) goes."""
    return f"{_stem(path)}-config.xml"


def _stem(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    return text[:-4] if text.lower().endswith(".xml") else text


def msccl_files(path: str | os.PathLike[str], choice: RuntimeChoice,
                options: MscclOptions) -> list[MscclFile]:
    """The algorithm files of ``choice``: ``path`` itself where one schedule serves every
    size, else ``STEM-below-512M.xml`` (``STEM``: ``path`` without ``.xml``) and ``path``
    for 512M and above, each with its range in its ``<algo>``."""
    ranges = choice.ranges()
    if len(ranges) == 1:
        return [MscclFile(os.fspath(path), plan_xml(choice.plan, choice.schedule.k, options))]
    files = []
    for low, high, part in ranges:
        where = os.fspath(path) if high is None else \
            f"{_stem(path)}-below-{size_label(high)}.xml"
        mine = replace(options, min_bytes=low,
                       max_bytes=high - 1 if high is not None else UNBOUNDED)
        files.append(MscclFile(where, plan_xml(part.plan, part.schedule.k, mine), low, high))
    return files


def config_xml(files: list[MscclFile], protocol: str) -> bytes:
    """microsoft/msccl's ``MSCCL_CONFIG`` document naming every file (made absolute, as
    the runtime opens them from its working directory) and its range."""
    root = etree.Element("msccl_algos")
    for f in files:
        load = etree.SubElement(root, "load")
        load.set("path", os.path.abspath(f.path))
        load.set("minbytes", str(f.min_bytes))
        if f.max_bytes is not None:
            load.set("maxbytes", str(f.max_bytes))
        load.set("proto", protocol)
    return etree.tostring(root, pretty_print=True, encoding="utf-8")
