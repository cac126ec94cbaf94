"""Predictable fresh names for new and pasted nodes and groups.

Pasting server ``n0`` (nodes ``n0.gpu0`` ...) next to ``n0`` gives server ``n1`` with
``n1.gpu0`` ...: the number at the end of the group name is bumped to the first unused
one, and node ids that start with the group name follow it. Other ids get the number at
their end bumped the same way (``ib0`` -> ``ib1``), or ``-2``, ``-3``... appended. Names
that are free (after a cut) are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TRAILING = re.compile(r"^(.*?)(\d+)$")
SEPARATORS = ".:/-_"


def bump(name: str, taken: set[str]) -> str:
    """The first name after ``name`` (same stem, next number) that is not ``taken``."""
    match = _TRAILING.match(name)
    if match:
        stem, number = match.group(1), int(match.group(2))
    else:
        stem, number = name + "-", 1
    while True:
        number += 1
        candidate = f"{stem}{number}"
        if candidate not in taken:
            return candidate


def fresh_id(stem: str, taken: set[str]) -> str:
    """``stem0``, ``stem1``... whichever comes first and is not ``taken``."""
    number = 0
    while f"{stem}{number}" in taken:
        number += 1
    return f"{stem}{number}"


def _group_taken(groups: Iterable[str], ids: Iterable[str]) -> set[str]:
    """Names unusable for a new group: existing groups and prefixes of existing ids."""
    taken = set(groups)
    for node_id in ids:
        for i, ch in enumerate(node_id):
            if ch in SEPARATORS:
                taken.add(node_id[:i])
    return taken


def paste_names(node_ids: list[str], node_groups: dict[str, str | None],
                existing_ids: set[str], existing_groups: set[str]
                ) -> tuple[dict[str, str], dict[str, str]]:
    """Fresh ids for pasted nodes and fresh names for their groups.

    Returns ``(id_map, group_map)`` mapping old names to new ones; nothing maps to a name
    that exists or to a name given to another pasted item.
    """
    group_taken = _group_taken(existing_groups, existing_ids)
    group_map: dict[str, str] = {}
    for group in dict.fromkeys(g for g in node_groups.values() if g):
        renamed = group if group not in group_taken else bump(group, group_taken)
        group_map[group] = renamed
        group_taken.add(renamed)
    taken = set(existing_ids)
    id_map: dict[str, str] = {}
    for node_id in node_ids:
        node_group = node_groups.get(node_id)
        new: str | None = None
        if node_group and node_id.startswith(node_group) and len(node_id) > len(node_group) \
                and node_id[len(node_group)] in SEPARATORS:
            candidate = group_map[node_group] + node_id[len(node_group):]
            if candidate not in taken:
                new = candidate
        if new is None:
            new = node_id if node_id not in taken else bump(node_id, taken)
        id_map[node_id] = new
        taken.add(new)
    return id_map, group_map


def counted(count: int, noun: str) -> str:
    """ "1 switch", "20 switches", "1 link": a count with its noun in the right number."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun}{'es' if noun.endswith(('s', 'sh', 'ch', 'x')) else 's'}"
