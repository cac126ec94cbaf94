"""Bandwidths of any range stay exact through the whole pipeline."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from canopy.engine.forestcoll.solve import solve
from canopy.engine.model.topology import SWITCH, Link, Node, Topology
from canopy.engine.network.capacity_graph import INT64_MAX, ArcTable


def star(bandwidths: list[Fraction], extra: Fraction | None = None) -> Topology:
    names = [f"g{i}" for i in range(len(bandwidths))]
    nodes = [Node(n) for n in names] + [Node("s", SWITCH)]
    links = [Link(n, "s", b) for n, b in zip(names, bandwidths, strict=True)]
    if extra is not None:
        links.append(Link(names[0], names[1], extra))
    return Topology("wide", nodes, links)


def test_arc_table_keeps_python_ints_past_int64() -> None:
    table = ArcTable(3)
    table.add(0, 1, 5)
    table.add(1, 2, INT64_MAX)
    table.add(1, 2, 1)
    assert table.get(1, 2) == INT64_MAX + 1
    assert table.total() == INT64_MAX + 6
    assert table.network([(0, 2, 10**30)]).max_flow(0, 2) == 10**30 + 5
    assert type(table.get(1, 2)) is int
    assert isinstance(table.network().max_flow(1, 2), int)
    assert np.int64(5) == table.get(0, 1)


def test_mixed_decimals_solve_exactly() -> None:
    bws = [Fraction(1000000), Fraction("0.3333333333333333"), Fraction("0.001")]
    schedule = solve(star(bws, Fraction("2.3333333333")))
    assert schedule.optimum.cut_bandwidth == Fraction("0.001")
    assert schedule.optimal_algbw == Fraction("0.0015")


def test_huge_and_tiny_bandwidths_solve_exactly() -> None:
    bws = [Fraction(10**308), Fraction(1, 10**300), Fraction(10**400)]
    schedule = solve(star(bws))
    assert schedule.optimum.cut_bandwidth == Fraction(1, 10**300)
    assert schedule.algbw == schedule.optimal_algbw
