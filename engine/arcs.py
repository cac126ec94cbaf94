"""A mutable directed multigraph with integer capacities, kept in numpy arrays.

Edge splitting and tree packing change capacities one arc at a time and ask many maxflow
questions in between. Keeping arcs in growing numpy arrays makes each question's flow
network one vectorised call instead of a Python loop over every arc.

Capacities are int64 while they fit; the first value past int64 turns the capacity
array into Python integers (``dtype=object``), so any bandwidth range stays exact and
:class:`~canopy.engine.maxflow.FlowNetwork` answers with its big-integer backend.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from canopy.engine.maxflow import FlowNetwork

INT64_MAX = 2**63 - 1


def cap_array(values: Iterable[int]) -> np.ndarray:
    """Capacities as an int64 array, or an array of Python ints when one exceeds int64."""
    values = [int(v) for v in values]
    if values and max(values) > INT64_MAX:
        return np.array(values, dtype=object)
    return np.array(values, dtype=np.int64)


class ArcTable:
    """Capacities ``c(a, b)`` on nodes ``0 .. num_nodes-1`` with neighbour sets."""

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes
        self._index: dict[tuple[int, int], int] = {}
        self._tails = np.zeros(64, dtype=np.int32)
        self._heads = np.zeros(64, dtype=np.int32)
        self._caps = np.zeros(64, dtype=np.int64)
        self._count = 0
        self.out: list[set[int]] = [set() for _ in range(num_nodes)]
        self.inn: list[set[int]] = [set() for _ in range(num_nodes)]

    def get(self, a: int, b: int) -> int:
        pos = self._index.get((a, b))
        return 0 if pos is None else int(self._caps[pos])

    def add(self, a: int, b: int, delta: int) -> None:
        """Change c(a, b) by ``delta`` (creating the arc if needed)."""
        pos = self._index.get((a, b))
        if pos is None:
            if self._count == len(self._caps):
                grow = len(self._caps)
                self._tails = np.concatenate([self._tails, np.zeros(grow, dtype=np.int32)])
                self._heads = np.concatenate([self._heads, np.zeros(grow, dtype=np.int32)])
                self._caps = np.concatenate([self._caps, np.zeros(grow, dtype=self._caps.dtype)])
            pos = self._count
            self._count += 1
            self._index[(a, b)] = pos
            self._tails[pos], self._heads[pos] = a, b
        value = int(self._caps[pos]) + delta
        assert value >= 0, (a, b, value)
        if value > INT64_MAX and self._caps.dtype != object:
            self._caps = self._caps.astype(object)
        self._caps[pos] = value
        if value:
            self.out[a].add(b)
            self.inn[b].add(a)
        else:
            self.out[a].discard(b)
            self.inn[b].discard(a)

    def items(self) -> Iterable[tuple[tuple[int, int], int]]:
        for (a, b), pos in self._index.items():
            c = int(self._caps[pos])
            if c:
                yield (a, b), c

    def total(self) -> int:
        return int(self._caps[: self._count].sum())

    def network(self, extra: Iterable[tuple[int, int, int]] = (),
                num_nodes: int | None = None) -> FlowNetwork:
        """A flow network of the current capacities plus ``extra`` (tail, head, cap) arcs."""
        extra = list(extra)
        if not extra:
            return self.network_with(np.zeros(0, np.int32), np.zeros(0, np.int32),
                                     np.zeros(0, np.int64), num_nodes)
        et, eh, ec = zip(*extra, strict=True)
        return self.network_with(np.asarray(et, dtype=np.int32), np.asarray(eh, dtype=np.int32),
                                 cap_array(ec), num_nodes)

    def network_with(self, tails: np.ndarray, heads: np.ndarray, caps: np.ndarray,
                     num_nodes: int | None = None) -> FlowNetwork:
        """Like :meth:`network`, with the extra arcs given as arrays."""
        n = self._count
        return FlowNetwork.from_arrays(
            num_nodes or self.num_nodes, np.concatenate([self._tails[:n], tails]),
            np.concatenate([self._heads[:n], heads]), np.concatenate([self._caps[:n], caps]))
