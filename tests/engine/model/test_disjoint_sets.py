"""Disjoint sets (engine/model/disjoint_sets.py)."""

from canopy.engine.model.disjoint_sets import DisjointSets


def test_unions_join_sets_and_refuse_a_cycle():
    sets = DisjointSets("abcde")
    assert sets.union("a", "b") and sets.union("c", "d") and sets.union("b", "d")
    assert not sets.union("a", "c")             # a-b-d-c already joined: a cycle
    assert sets.find("a") == sets.find("c") != sets.find("e")
    assert sorted(sorted(g) for g in sets.groups()) == [["a", "b", "c", "d"], ["e"]]
    assert "e" in sets and "z" not in sets
