"""An allreduce's shards are cut at the common refinement of both phases' shares, each
part keyed by its root and exact start, and pointing at the tree it cuts."""

from fractions import Fraction

from canopy.engine.execution.compiler import _parts
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree


def _tree(key, root, share, reduce):
    return FlowTree(key, root, (FlowEdge(root, "w", (root, "w")),), Fraction(share), reduce)


def test_shards_are_cut_where_either_phase_cuts_them():
    # root r: reduce 1/3 + 2/3, broadcast 1/2 + 1/2, cuts at 1/3 and 1/2;
    # root w: one tree per phase (no cut)
    reduce_trees = (_tree("a", "r", Fraction(1, 3), True), _tree("b", "r", Fraction(2, 3), True),
                    _tree("c", "w", Fraction(1, 7), True))
    broadcast_trees = (_tree("d", "r", Fraction(1, 2), False),
                       _tree("e", "w", Fraction(1, 7), False),
                       _tree("f", "r", Fraction(1, 2), False))
    plan = CollectivePlan("allreduce", ("r", "w"), reduce_trees, broadcast_trees)
    reducing, broadcasting, sources = _parts(plan)
    assert [(t.key, t.share) for t in reducing] == [
        (("part", "r", 0), Fraction(1, 3)), (("part", "r", Fraction(1, 3)), Fraction(1, 6)),
        (("part", "r", Fraction(1, 2)), Fraction(1, 2)), (("part", "w", 0), Fraction(1, 7))]
    assert [(t.key, t.share) for t in broadcasting] == [
        (("part", "r", 0), Fraction(1, 3)), (("part", "r", Fraction(1, 3)), Fraction(1, 6)),
        (("part", "w", 0), Fraction(1, 7)), (("part", "r", Fraction(1, 2)), Fraction(1, 2))]
    assert sources == [0, 1, 1, 2, 3, 3, 4, 5]
    assert all(isinstance(t.key[2], Fraction) for t in (*reducing, *broadcasting))
