"""Facts about the last few objects asked about, kept by the objects' identity.

The layouts, the simulator and the MSCCL writers ask about one plan again and again (every
size and depth of a comparison, every layout of a runtime choice) and walking a large
plan's tree edges each time costs seconds. A plan is immutable, so what was computed of
it holds while the same object is asked about; an equal plan made anew is another object
and is computed anew.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")


class RecentMemo(Generic[Value]):
    """Per object, ``compute()``'s value for every key asked about, for the last ``kept``
    objects asked about. An object is held by a weak reference (remembering a plan does
    not keep it alive; what was kept of one no longer alive goes at the next new object)
    and matched by identity; a key by equality. A thread that asks about another object
    never sees this one's values: each entry is checked against the object asked about,
    and the entries are replaced as a whole."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.entries: tuple[tuple[weakref.ref[Any], dict[Hashable, Value]], ...] = ()

    def get(self, obj: object, key: Hashable, compute: Callable[[], Value]) -> Value:
        facts = next((known for ref, known in self.entries if ref() is obj), None)
        if facts is None:
            facts = {}
            alive = tuple(entry for entry in self.entries if entry[0]() is not None)
            self.entries = (*alive, (weakref.ref(obj), facts))[-self.kept:]
        if key not in facts:
            facts[key] = compute()
        return facts[key]

    def clear(self) -> None:
        self.entries = ()
