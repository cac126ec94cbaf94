"""A mutable directed multigraph with integer capacities, kept in Python lists.

Edge splitting changes capacities one arc at a time and asks maxflow questions in
between. Arcs keep their index for good, so each question's flow network is three list
copies (no loop over arcs in Python), and capacities are Python integers, so any
bandwidth range stays exact (:class:`~canopy.engine.network.maxflow.FlowNetwork` hands
capacities past int64 to its exact python backend).
"""

from __future__ import annotations

from collections.abc import Iterable

from canopy.engine.network.maxflow import FlowNetwork

INT64_MAX = 2**63 - 1


class ArcTable:
    """Capacities ``c(a, b)`` on nodes ``0 .. num_nodes-1`` with neighbour sets."""

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes
        self._index: dict[tuple[int, int], int] = {}
        self._tails: list[int] = []
        self._heads: list[int] = []
        self._caps: list[int] = []
        self.out: list[set[int]] = [set() for _ in range(num_nodes)]
        self.inn: list[set[int]] = [set() for _ in range(num_nodes)]

    def get(self, a: int, b: int) -> int:
        pos = self._index.get((a, b))
        return 0 if pos is None else self._caps[pos]

    def add(self, a: int, b: int, delta: int) -> None:
        """Change c(a, b) by ``delta`` (creating the arc if needed)."""
        pos = self._index.get((a, b))
        if pos is None:
            pos = self._index[(a, b)] = len(self._caps)
            self._tails.append(a)
            self._heads.append(b)
            self._caps.append(0)
        value = self._caps[pos] + delta
        assert value >= 0, (a, b, value)
        self._caps[pos] = value
        if value:
            self.out[a].add(b)
            self.inn[b].add(a)
        else:
            self.out[a].discard(b)
            self.inn[b].discard(a)

    def items(self) -> Iterable[tuple[tuple[int, int], int]]:
        caps = self._caps
        for edge, pos in self._index.items():
            if caps[pos]:
                yield edge, caps[pos]

    def total(self) -> int:
        return sum(self._caps)

    def network(self, extra: Iterable[tuple[int, int, int]] = (),
                num_nodes: int | None = None) -> FlowNetwork:
        """A flow network of the current capacities plus ``extra`` (tail, head, cap) arcs."""
        extra = list(extra)
        return FlowNetwork.from_arrays(
            num_nodes or self.num_nodes, self._tails + [t for t, _, _ in extra],
            self._heads + [h for _, h, _ in extra], self._caps + [c for _, _, c in extra])
