"""Slurm hostlist expressions: ``node[01-16,20]`` to names and back.

The rules are those of Slurm's hostlist parser (src/common/hostlist.c, used by
topology.conf(5) for ``Nodes=`` and ``Switches=``), written here from its behaviour:

- an expression is a list of names or bracketed names separated by commas, spaces, tabs
  or newlines; a comma inside brackets belongs to the brackets;
- ``prefix[list]suffix`` stands for one name per number of ``list``, a comma list of
  numbers ``7`` and ranges ``lo-hi``; each number is written with at least as many digits
  as ``lo`` was written with (zero padding: ``[01-10]`` gives ``01`` ... ``10``,
  ``[1-10]`` gives ``1`` ... ``10``);
- several bracket groups multiply: ``r[1-2]n[1-3]`` is six names, the first group
  varying slowest;
- a range that runs backwards (``n[5-1]``), a negative or non-numeric bound, empty or
  unbalanced brackets, or brackets inside brackets are errors (:class:`HostlistError`,
  one sentence naming the expression).

:func:`compress_hostlist` writes names back as a short expression: names are grouped by
the text around their last run of digits (then, for names left alone, the run before),
each group sorted by number, and runs of consecutive numbers written with the same
padding become ranges.

>>> expand_hostlist("node[01-03,10],login")
['node01', 'node02', 'node03', 'node10', 'login']
>>> compress_hostlist(["node01", "node02", "node03", "node10", "login"])
'login,node[01-03,10]'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from canopy.engine.model.errors import CanopyError

SEPARATORS = ",\t\n "
MAX_RANGE = 65536
"""Names one range may stand for (Slurm's limit, MAX_SLURM_NODES)."""
MAX_NAMES = 1_000_000
"""Names one expression may stand for."""
FORBIDDEN = re.compile(r"[\s,\[\]=#\"\\]")
"""Characters a name cannot hold in a hostlist or topology.conf."""



class HostlistError(CanopyError):
    """A hostlist expression Canopy cannot read; the message quotes it."""


def split_hostlist(text: str) -> list[str]:
    """The expression's items: separators outside brackets split it."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"the hostlist '{text}' has brackets inside brackets.")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"the hostlist '{text}' closes a bracket it never "
                                    "opened.")
        if ch in SEPARATORS and depth == 0:
            if current:
                items.append("".join(current))
                current = []
            continue
        current.append(ch)
    if depth:
        raise HostlistError(f"the hostlist '{text}' opens a bracket it never closes.")
    if current:
        items.append("".join(current))
    return items


def expand_hostlist(text: str) -> list[str]:
    """Every name ``text`` stands for, in order (duplicates kept, as Slurm keeps them)."""
    names: list[str] = []
    for item in split_hostlist(text):
        names.extend(_expand_item(item, text))
        if len(names) > MAX_NAMES:
            raise HostlistError(f"the hostlist '{_short(text)}' stands for more than "
                                f"{MAX_NAMES} names.")
    return names


def _expand_item(item: str, text: str) -> list[str]:
    parts = re.split(r"(\[[^\]]*\])", item)
    results = [""]
    for part in parts:
        if part.startswith("["):
            numbers = _range_list(part[1:-1], text)
            if len(results) * len(numbers) > MAX_NAMES:
                raise HostlistError(f"the hostlist '{_short(text)}' stands for more than "
                                    f"{MAX_NAMES} names.")
            results = [r + n for r in results for n in numbers]
        else:
            results = [r + part for r in results]
    return results


def hostlist_size(text: str) -> int:
    """How many names ``text`` stands for, without writing them out (its errors are
    those of :func:`expand_hostlist`)."""
    total = 0
    for item in split_hostlist(text):
        count = 1
        for part in re.findall(r"\[[^\]]*\]", item):
            count *= sum(hi - lo + 1 for lo, hi, _ in _ranges_in(part[1:-1], text))
        total += count
    return total


def _range_list(inside: str, text: str) -> list[str]:
    return [str(n).zfill(width) for lo, hi, width in _ranges_in(inside, text)
            for n in range(lo, hi + 1)]


def _ranges_in(inside: str, text: str) -> list[tuple[int, int, int]]:
    """(lo, hi, zero-padded width) of each number or range inside one pair of brackets."""
    if not inside.strip():
        raise HostlistError(f"the hostlist '{_short(text)}' has empty brackets.")
    out: list[tuple[int, int, int]] = []
    for element in inside.split(","):
        element = element.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", element)
        if match is None:
            raise HostlistError(f"the hostlist '{_short(text)}' has '{element}' in brackets, "
                                "which is neither a number nor a range lo-hi of numbers.")
        lo_text, hi_text = match.group(1), match.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise HostlistError(f"the hostlist '{_short(text)}' has the range {element}, "
                                "which runs backwards (write the smaller number first).")
        if hi - lo + 1 > MAX_RANGE:
            raise HostlistError(f"the hostlist '{_short(text)}' has the range {element}, "
                                f"more than {MAX_RANGE} names.")
        out.append((lo, hi, len(lo_text)))
    return out


def check_name(name: str, what: str = "name") -> None:
    """Refuse a name a hostlist cannot carry (separators, brackets, '=', '#', quotes)."""
    if not name or FORBIDDEN.search(name):
        raise HostlistError(f"the {what} '{name}' holds a character Slurm's hostlists "
                            "cannot carry (space, comma, bracket, '=', '#', quote or "
                            "backslash).")


def compress_hostlist(names: Iterable[str]) -> str:
    """The shortest expression (see the module docstring) for the set of ``names``: names
    are grouped by the text around their last run of digits; a name alone in its group
    tries the run of digits before (``leaf00-0`` ... ``leaf03-0`` is ``leaf[00-03]-0``)."""
    left: set[str] = set()
    for name in names:
        check_name(name)
        left.add(name)
    items: list[tuple[tuple, str]] = []
    field = 1
    while left:
        groups: dict[tuple[str, str], set[str]] = {}
        for name in left:
            runs = list(re.finditer(r"\d+", name))
            if len(runs) < field:
                items.append((_key(name), name))
                continue
            run = runs[-field]
            groups.setdefault((name[:run.start()], name[run.end():]), set()).add(run.group())
        left = set()
        for (prefix, suffix), numbers in groups.items():
            if len(numbers) == 1:
                left.add(prefix + next(iter(numbers)) + suffix)
            else:
                items.append((_key(prefix + suffix),
                              f"{prefix}[{','.join(_ranges(numbers))}]{suffix}"))
        field += 1
    return ",".join(text for _, text in sorted(items))


def _ranges(numbers: set[str]) -> list[str]:
    """Runs of consecutive numbers that one padding width writes exactly: from the
    smallest number left, a run grows while the next number, padded like the first, is
    one of ``numbers``."""
    left = set(numbers)
    out = []
    for lo in sorted(numbers, key=lambda t: (int(t), len(t))):
        if lo not in left:
            continue
        width = len(lo)
        hi = int(lo)
        left.discard(lo)
        while str(hi + 1).zfill(width) in left:
            hi += 1
            left.discard(str(hi).zfill(width))
        out.append(lo if hi == int(lo) else f"{lo}-{str(hi).zfill(width)}")
    return out


def _key(text: str) -> tuple:
    return tuple((0, int(p), len(p)) if p.isdigit() else (1, p, 0)
                 for p in re.split(r"(\d+)", text) if p)


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."
