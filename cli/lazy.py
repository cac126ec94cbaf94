"""argparse choices read from an engine module only when they are needed.

``canopy solve`` registers options of other verbs' engines (all-to-all, MSCCL export)
whose modules import scipy and more; importing them just to build the parser would cost
most of a small solve's start-up. argparse only tests membership when the
option is given and lists the choices for ``--help`` or an error.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import overload


class LazyChoices(Sequence[str]):
    """The sequence ``module.name``, imported on first use."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def _values(self) -> Sequence[str]:
        return getattr(importlib.import_module(self.module), self.name)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._values()[index]

    def __len__(self) -> int:
        return len(self._values())

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __contains__(self, value: object) -> bool:
        return value in self._values()
