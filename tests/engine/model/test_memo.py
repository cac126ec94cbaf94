"""RecentMemo: values kept by the identity of the object asked about, for the last few."""

import gc

from canopy.engine.model.memo import RecentMemo


class Plan:
    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and other.name == self.name

    __hash__ = None     # like a plan of unhashable parts: only identity can match


def test_the_same_object_and_key_compute_once_an_equal_object_anew():
    memo: RecentMemo[str] = RecentMemo(4)
    calls = []

    def compute(plan: Plan, key: int) -> str:
        calls.append((plan.name, key))
        return f"{plan.name}{key}"

    a, twin = Plan("a"), Plan("a")
    assert memo.get(a, 1, lambda: compute(a, 1)) == "a1"
    assert memo.get(a, 1, lambda: compute(a, 1)) == "a1"
    assert memo.get(a, 2, lambda: compute(a, 2)) == "a2"
    assert memo.get(twin, 1, lambda: compute(twin, 1)) == "a1"
    assert calls == [("a", 1), ("a", 2), ("a", 1)]


def test_only_the_last_few_objects_are_kept_with_all_their_keys_and_no_dead_one():
    memo: RecentMemo[int] = RecentMemo(2)
    plans = [Plan(str(i)) for i in range(3)]
    for i, plan in enumerate(plans):
        memo.get(plan, 0, lambda i=i: i)
        memo.get(plan, 1, lambda i=i: 10 * i)
    assert [facts for _, facts in memo.entries] == [{0: 1, 1: 10}, {0: 2, 1: 20}]
    assert memo.get(plans[0], 0, lambda: 7) == 7           # forgotten, computed anew
    assert memo.get(plans[2], 1, lambda: 0) == 20          # still kept
    del plans[2]
    gc.collect()
    memo.get(plans[1], 5, lambda: 5)
    assert all(ref() is not None for ref, _ in memo.entries)
    assert [facts for _, facts in memo.entries] == [{0: 7}, {5: 5}]
