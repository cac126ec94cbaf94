"""Parsing untrusted XML safely (NCCL topology dumps, GraphML, MSCCL XML).

The parser never expands entities, never loads a DTD or anything over the network, and
refuses documents above a size limit, so a "billion laughs" or external-entity file is
rejected with one sentence instead of exhausting memory or reading local files.
"""

from __future__ import annotations

import os
from pathlib import Path

from lxml import etree

from canopy.engine.model.errors import CanopyError, unreadable

MAX_XML_BYTES = 64 * 1024 * 1024


class XmlError(CanopyError):
    """An XML file that is unsafe or not well formed."""


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           dtd_validation=False, huge_tree=False, remove_comments=True)


def one_line(text: str) -> str:
    """``text`` on one line: libxml2's messages may end a clause with a line break
    ("Char 0x0 out of allowed range\\n, line 1, column 8")."""
    return " ".join(text.split()).replace(" ,", ",")


def parse_xml_bytes(data: bytes, source: str = "XML") -> etree._Element:
    """Parse ``data`` and return its root element; unsafe or broken XML raises XmlError."""
    if len(data) > MAX_XML_BYTES:
        raise XmlError(f"{source} is larger than {MAX_XML_BYTES // (1024 * 1024)} MiB.")
    if b"<!ENTITY" in data or b"<!entity" in data:
        raise XmlError(f"{source} declares XML entities, which Canopy does not accept.")
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise XmlError(f"{source} is not well-formed XML ({one_line(exc.msg)}).") from None
    if root is None:
        raise XmlError(f"{source} is empty.")
    return root


def parse_xml_file(path: str | os.PathLike[str]) -> etree._Element:
    """Read and parse an XML file with the limits of :func:`parse_xml_bytes`."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_XML_BYTES:
            raise XmlError(f"{p} is larger than {MAX_XML_BYTES // (1024 * 1024)} MiB.")
        data = p.read_bytes()
    except FileNotFoundError:
        raise XmlError(f"{p}: no such file.") from None
    except OSError as exc:
        raise XmlError(unreadable(p, exc)) from None
    return parse_xml_bytes(data, str(p))
