"""Mutations of valid files for fuzzing the readers (``bench/fuzz.py``, the suite's
``tests/test_fuzz_readers.py``).

:func:`mutate` parses a valid file (JSON, XML, TOML, or a line format: ibnetdiscover
dumps, Slurm's topology.conf), edits its structure one to three
times (drop, duplicate, retype or swap a field; a huge, negative, NaN, non-ASCII, empty
or very long value; deep nesting), writes it back and then, now and then, truncates it,
re-encodes it wrongly (UTF-16, Latin-1, a byte-order mark, invalid UTF-8) or damages
bytes (flip, insert, delete, repeat). Every choice comes from the ``random.Random``
given, so an input is reproduced from its seed; :func:`mutate` also returns a short
description of what it did.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

from lxml import etree

WEIRD_NUMBERS: list[Any] = [
    0, -1, -0.0, 1e308, -1e308, 10**400, -(10**30), 2**63, 2**64 + 1, 1e-320, 0.1,
    float("nan"), float("inf"), float("-inf"), 3.5, 10**4000, 123456789012345678901234567890,
]
WEIRD_TEXT = [
    "", " ", "NaN", "Infinity", "-Infinity", "1e999999999", "-5", "0", "0x1F", "1/0", "1/3",
    "١٢٣", "½", "∞", "h\u00e9llo", "\u2603\u2603", "\ud83d\ude00", "a\x00b", "\u202e",
    "x" * 5000, "1" * 2000, "400Gb/s", "25 GB/s", "1e-1000", "1e1001", "true", "null",
    "../../etc/passwd", "<&>\"'", "\t\n", "n0.gpu0", "gpu", "switch", "compute",
]


def weird_value(rng: random.Random) -> Any:
    """A value of any JSON type, likely to upset a reader."""
    pick = rng.random()
    if pick < 0.35:
        return rng.choice(WEIRD_NUMBERS)
    if pick < 0.7:
        return rng.choice(WEIRD_TEXT)
    return rng.choice([None, True, False, [], {}, [1, 2], {"a": 1}, [[[]]], ["x"] * 3])


# --- JSON -----------------------------------------------------------------------------

def _containers(value: Any, out: list[Any]) -> list[Any]:
    """Every dict and list in ``value`` (iteratively: it may already be nested deeply)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            out.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return out


def _mutate_tree(rng: random.Random, root: Any) -> tuple[Any, str]:
    """One structural edit of a parsed JSON/TOML document (in place where it can be)."""
    places = _containers(root, [])
    if not places:
        return weird_value(rng), "replaced the document"
    where = rng.choice(places)
    keys = list(where) if isinstance(where, dict) else list(range(len(where)))
    op = rng.choice(["drop", "duplicate", "retype", "swap", "weird", "weird", "nest",
                     "wrap", "empty", "number-text"])
    if not keys:
        if isinstance(where, dict):
            where["x"] = weird_value(rng)
        else:
            where.append(weird_value(rng))
        return root, "filled an empty container"
    key = rng.choice(keys)
    if op == "drop":
        del where[key]
        return root, f"dropped {key!r}"
    if op == "duplicate":
        if isinstance(where, dict):
            where[f"{key}_copy"] = json.loads(json.dumps(where[key], default=str))
        else:
            for _ in range(rng.choice([1, 1, 2, 50])):
                where.insert(key, json.loads(json.dumps(where[key], default=str)))
        return root, f"duplicated {key!r}"
    if op == "swap" and len(keys) > 1:
        other = rng.choice(keys)
        where[key], where[other] = where[other], where[key]
        return root, f"swapped {key!r} and {other!r}"
    if op == "nest":
        deep: Any = where[key]
        for _ in range(rng.choice([50, 900, 5000])):
            deep = [deep]
        where[key] = deep
        return root, f"nested {key!r} deeply"
    if op == "wrap":
        where[key] = rng.choice([[where[key]], {"value": where[key]}, str(where[key])[:200]])
        return root, f"wrapped {key!r}"
    if op == "empty":
        where[key] = type(where[key])() if isinstance(where[key], (dict, list, str)) else None
        return root, f"emptied {key!r}"
    if op == "number-text" and isinstance(where[key], (int, float)):
        where[key] = str(where[key])
        return root, f"quoted the number {key!r}"
    value = weird_value(rng)
    where[key] = value
    return root, f"set {key!r} to {str(value)[:40]!r}"


def _json_dumps(value: Any) -> str:
    try:
        return json.dumps(value, indent=rng_indent(value), ensure_ascii=False)
    except (ValueError, RecursionError):
        return json.dumps(str(value)[:1000])


def rng_indent(value: Any) -> int | None:
    return None if len(str(value)) > 200_000 else 1


def mutate_json(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    root = json.loads(data)
    hows = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        root, how = _mutate_tree(rng, root)
        hows.append(how)
        if "deeply" in how:
            break
    try:
        text = _json_dumps(root)
    except RecursionError:
        text = "[" * 100_000
    return text.encode("utf-8", "surrogatepass"), "; ".join(hows)


# --- XML ------------------------------------------------------------------------------

def mutate_xml(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    parser = etree.XMLParser(resolve_entities=False, huge_tree=True, remove_blank_text=True)
    root = etree.fromstring(data, parser)
    hows = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        hows.append(_mutate_element(rng, root))
        if "deeply" in hows[-1]:
            break
    out = etree.tostring(root)
    if rng.random() < 0.05:
        out = rng.choice([
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b '
            b'"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
            + out.replace(b">", b">&c;", 1),
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            + out.replace(b">", b">&e;", 1),
        ])
        hows.append("entities")
    return out, "; ".join(hows)


def _mutate_element(rng: random.Random, root: etree._Element) -> str:
    elements = [e for e in root.iter() if isinstance(e.tag, str)]
    elem = rng.choice(elements)
    op = rng.choice(["drop", "duplicate", "attr-drop", "attr-weird", "attr-weird",
                     "attr-swap", "nest", "move", "text", "rename"])
    parent = elem.getparent()
    if op == "drop" and parent is not None:
        parent.remove(elem)
        return f"dropped <{elem.tag}>"
    if op == "duplicate" and parent is not None:
        for _ in range(rng.choice([1, 1, 3, 200])):
            parent.insert(parent.index(elem), _copy(elem))
        return f"duplicated <{elem.tag}>"
    if op == "nest" and parent is not None:
        deep = _copy(elem)
        for _ in range(rng.choice([20, 300, 3000])):
            wrapper = etree.Element(elem.tag, dict(elem.attrib))
            wrapper.append(deep)
            deep = wrapper
        parent.replace(elem, deep)
        return f"nested <{elem.tag}> deeply"
    if op == "move" and parent is not None:
        target = rng.choice(elements)
        if elem not in target.iterancestors() and target is not elem:
            parent.remove(elem)
            target.append(elem)
            return f"moved <{elem.tag}> into <{target.tag}>"
    if op == "text":
        elem.text = _xml_text(weird_value(rng))
        return f"set the text of <{elem.tag}>"
    if op == "rename":
        elem.tag = rng.choice(["x", "node", "gpu", "nic", "edge", "tb", "step", "ränk"])
        return f"renamed <{elem.tag}>"
    attrs = list(elem.attrib)
    if not attrs:
        elem.set(rng.choice(["id", "dev", "bw", "type", "key", "count"]),
                 _xml_text(weird_value(rng)))
        return f"added an attribute to <{elem.tag}>"
    name = rng.choice(attrs)
    if op == "attr-drop":
        del elem.attrib[name]
        return f"dropped {elem.tag}@{name}"
    if op == "attr-swap":
        other = rng.choice(elements)
        if other.attrib:
            theirs = rng.choice(list(other.attrib))
            elem.attrib[name], other.attrib[theirs] = other.attrib[theirs], elem.attrib[name]
            return f"swapped {elem.tag}@{name} and {other.tag}@{theirs}"
    value = _xml_text(weird_value(rng))
    elem.set(name, value)
    return f"set {elem.tag}@{name} to {value[:40]!r}"


def _copy(elem: etree._Element) -> etree._Element:
    return copy.deepcopy(elem)


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str) \
        if not isinstance(value, float) else repr(value)
    return _XML_BAD.sub("?", text)[:6000]


# --- TOML (line-aware: Canopy has no TOML writer) --------------------------------------

def mutate_toml(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    lines = data.decode("utf-8").splitlines()
    hows = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        i = rng.randrange(len(lines))
        op = rng.choice(["drop", "duplicate", "value", "value", "value", "swap", "header",
                         "key"])
        if op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "header":
            lines.insert(i, rng.choice(["[grid]", "[[grid]]", "[sizes]", "[x.y.z]", "[]"]))
        elif op == "key":
            lines.insert(i, f"{rng.choice(['servers', 'gpus', 'kind', 'seeds', 'sizes'])}"
                            f" = {_toml_value(rng)}")
        elif "=" in lines[i]:
            key = lines[i].split("=", 1)[0]
            lines[i] = f"{key}= {_toml_value(rng)}"
        hows.append(f"{op} line {i}")
        if not lines:
            lines = [""]
    return "\n".join(lines).encode("utf-8", "surrogatepass"), "; ".join(hows)


def _toml_value(rng: random.Random) -> str:
    return rng.choice([
        "-1", "0", "1e308", "nan", "inf", "-inf", str(10**400), "9" * 30, "[]", "[1, 2, 3]",
        "[" + ", ".join(str(i) for i in range(5000)) + "]", '"x"', '"\u2603"', "true",
        "{a = 1}", "[[[]]]", '"1e999999"', "1979-05-27", "0x10", "[1, \"a\"]", '""',
        "[" * 200 + "]" * 200, "'''\nmany\n'''", "3.5", "-0.0",
    ])


# --- line formats (ibnetdiscover dumps, Slurm's topology.conf) -------------------------

_TOKEN = re.compile(r'0x[0-9A-Fa-f]+|[0-9A-Fa-f]{12,}|\d+|"[^"]*"|[A-Za-z_]+|\s+|.')
WEIRD_LINES = {
    "ibnet": [
        "Switch\t99999999999999 \"S-ffffffffffffffff\"\t# \"x\" lid 1",
        "Ca\t0 \"H-0\"\t# \"\"", "Rt\t2 \"R-12\"", "Ca\t1 \"S-1234\"",
        "[0]\t\"S-1\"[0]\t# lid 1 4xNDR", "[1]\t\"H-1\"[99999999]\t# 12xXDR",
        "[1](0)\t\"H-ffff\"[1](ffff)\t# \"\" 3xNDR", "[1]\t\"S-1\"[1]\t# ?????",
        "switchguid=0x0(0)", "caguid=0xzz", "sysimgguid=", "Chassis 1", "[",
        "Switch", "Ca 1", "[1] [ext 7](1)\t\"S-00\"[1] [ext 7]\t# 4xHDR",
    ],
    "slurm": [
        "SwitchName=s Switches=s", "SwitchName=a Switches=b", "SwitchName=b Switches=a",
        "SwitchName= Nodes=", "SwitchName=x Nodes=n[1-65536]",
        "SwitchName=y Nodes=r[1-1000]n[1-1000]", "BlockName=b Nodes=n[0-99999999999]",
        "BlockSizes=3,6,12", "BlockSizes=0", "BlockSizes=" + "9" * 400,
        "SwitchName=z LinkSpeed=" + "9" * 5000, "SwitchName=\"quoted name\" Nodes=a",
        "SwitchName=c Nodes=n[5-1]", "SwitchName=d Nodes=n[[1-2]]", "RingName=r",
        "SwitchName=e Nodes=n[1-2" + ",3" * 3000 + "]", "Nodes=n1", "\\", "#",
        "SwitchName=f Switches=" + ",".join(f"g{i}" for i in range(300)),
    ],
}


def _chain(kind: str, rng: random.Random) -> list[str]:
    """Many records, each depending on the next (deep hierarchies, long dumps)."""
    n = rng.choice([100, 3000, 20000])
    if kind == "slurm":
        return [f"SwitchName=c{i} Switches=c{i + 1}" for i in range(n)] + \
            [f"SwitchName=c{n} Nodes=h[1-2]"]
    out = []
    for i in range(n):
        out += [f'Switch\t2 "S-{i:016x}"\t# "sw{i}" enhanced port 0 lid {i} lmc 0',
                f'[1]\t"S-{(i + 1) % n:016x}"[2]\t# "sw" lid 1 4xNDR',
                f'[2]\t"S-{(i - 1) % n:016x}"[1]\t# "sw" lid 1 4xNDR', ""]
    return out


def _weird_token(rng: random.Random, token: str) -> str:
    if token.isdigit() or token.startswith("0x"):
        return rng.choice(["0", "-1", "00", str(10**400), "9" * 30, "18446744073709551616",
                           "1e9", "0x", "٣", "4294967296", token * 3])
    if token.startswith('"'):
        return rng.choice(['""', '"', '"a"b"', '"' + "x" * 5000 + '"', '"h\u00e9 \u2603"',
                           '"MF0;:"', '"a\tb c d"'])
    return rng.choice(["", "x", "??", "???", "4x", "NDR", "12xXDR", "Switch", "Ca", "Rt",
                       "[ext 1]", "#", "\\", "=", ",", "[", "]", "\t", "é", "\u2603",
                       "\x00", token.upper(), token * 2])


def mutate_lines(rng: random.Random, data: bytes, kind: str) -> tuple[bytes, str]:
    """Line-aware edits of a line format: drop, duplicate, swap or cut lines, change,
    drop or repeat a token (numbers, GUIDs, quoted text, words), insert a line of the
    format that breaks a rule, or append a long chain of records."""
    lines = data.decode("utf-8").splitlines()
    hows = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        op = rng.choice(["drop", "duplicate", "swap", "cut", "token", "token", "token",
                         "token-drop", "token-repeat", "line", "line", "chain"])
        if op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines[i:i] = [lines[i]] * rng.choice([1, 1, 3, 200])
        elif op == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)]
        elif op == "line":
            lines.insert(i, rng.choice(WEIRD_LINES[kind]))
        elif op == "chain":
            lines += _chain(kind, rng)
        else:
            tokens = _TOKEN.findall(lines[i])
            if not tokens:
                lines[i] = rng.choice(WEIRD_LINES[kind])
            else:
                t = rng.randrange(len(tokens))
                if op == "token-drop":
                    del tokens[t]
                elif op == "token-repeat":
                    tokens.insert(t, tokens[t] * rng.choice([2, 50]))
                else:
                    tokens[t] = _weird_token(rng, tokens[t])
                lines[i] = "".join(tokens)
        hows.append(f"{op} line {i}")
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"), "; ".join(hows)


# --- whole files --------------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Byte-level damage: flips, inserts, deletes, repeats."""
    buf = bytearray(data)
    hows = []
    for _ in range(rng.choice([1, 2, 4, 16])):
        if not buf:
            buf.extend(b"\x00")
        i = rng.randrange(len(buf))
        op = rng.choice(["flip", "insert", "delete", "repeat", "byte"])
        if op == "flip":
            buf[i] ^= 1 << rng.randrange(8)
        elif op == "insert":
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == "delete":
            del buf[i:i + rng.randint(1, 64)]
        elif op == "repeat":
            buf[i:i] = bytes(buf[i:i + rng.randint(1, 64)]) * rng.choice([2, 10, 1000])
        else:
            buf[i] = rng.choice(b"\x00\xff{}[]<>\"'&;\\\n,:=0")
        hows.append(op)
    return bytes(buf), "bytes: " + ",".join(hows)


def damage_whole(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Truncation or a wrong encoding of a whole file."""
    op = rng.choice(["truncate", "utf16", "latin1", "bom", "invalid-utf8", "empty", "nul"])
    if op == "truncate":
        return data[:rng.randrange(max(1, len(data)))], "truncated"
    if op == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16"), "UTF-16"
    if op == "latin1":
        return data.decode("utf-8", "replace").encode("latin-1", "replace") + \
            "é\u00ff".encode("latin-1"), "Latin-1"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "byte-order mark"
    if op == "invalid-utf8":
        i = rng.randrange(max(1, len(data)))
        return data[:i] + b"\xc3\x28\xff\xfe" + data[i:], "invalid UTF-8"
    if op == "empty":
        return b"", "empty"
    return data.replace(b" ", b"\x00", 3), "NUL bytes"


MUTATORS = {"json": mutate_json, "xml": mutate_xml, "toml": mutate_toml,
            "ibnet": lambda rng, data: mutate_lines(rng, data, "ibnet"),
            "slurm": lambda rng, data: mutate_lines(rng, data, "slurm")}


def mutate(rng: random.Random, data: bytes, kind: str) -> tuple[bytes, str]:
    """A mutated copy of the valid file ``data`` of kind json, xml, toml, ibnet or slurm
    (line formats), and what was done: mostly structure-aware edits, sometimes then
    whole-file or byte-level damage, sometimes byte-level damage alone."""
    pick = rng.random()
    if pick < 0.15:
        return mutate_bytes(rng, data)
    out, how = MUTATORS[kind](rng, data)
    if pick < 0.27:
        extra, more = damage_whole(rng, out)
        return extra, f"{how}; {more}"
    if pick < 0.35:
        extra, more = mutate_bytes(rng, out)
        return extra, f"{how}; {more}"
    return out, how
