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


def test_only_the_last_few_are_kept_and_no_dead_object_is():
    memo: RecentMemo[int] = RecentMemo(2)
    plans = [Plan(str(i)) for i in range(3)]
    for i, plan in enumerate(plans):
        memo.get(plan, 0, lambda i=i: i)
    assert [value for _, _, value in memo.entries] == [1, 2]
    assert memo.get(plans[0], 0, lambda: 10) == 10          # forgotten, computed anew
    del plans[2]
    gc.collect()
    memo.get(plans[1], 5, lambda: 5)
    assert all(ref() is not None for ref, _, _ in memo.entries)
    assert [value for _, _, value in memo.entries] == [10, 5]
