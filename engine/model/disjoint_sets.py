"""Disjoint sets of hashable items (union-find with path halving), for the connected
groups of a graph given by its edges, where importing a graph library would cost more
than the search."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

Item = TypeVar("Item", bound=Hashable)


class DisjointSets(Generic[Item]):
    """The items given, each first in a set of its own."""

    def __init__(self, items: Iterable[Item]) -> None:
        self._parent = {x: x for x in items}

    def __contains__(self, x: object) -> bool:
        return x in self._parent

    def find(self, x: Item) -> Item:
        """The item that names ``x``'s set."""
        parent = self._parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: Item, b: Item) -> bool:
        """Join the sets of ``a`` and ``b``; False where they were one set already."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self._parent[ra] = rb
        return True

    def groups(self) -> list[set[Item]]:
        """The sets, in the order of the first item given of each."""
        found: dict[Item, set[Item]] = {}
        for x in self._parent:
            found.setdefault(self.find(x), set()).add(x)
        return list(found.values())
