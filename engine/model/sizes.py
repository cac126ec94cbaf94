"""Message sizes written as nccl-tests writes them: ``1M`` is 2^20 bytes.

>>> parse_size("16M")
16777216
>>> size_label(1 << 30)
'1G'
"""

from __future__ import annotations

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_MESSAGE_BYTES

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """'1M' -> 1048576 (nccl-tests style, powers of two), '4096' -> 4096.

    Raises :class:`~canopy.engine.model.errors.CanopyError` with one sentence otherwise.
    """
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = t[:len(t) - len(unit)] if unit else t
    try:
        if len(number) > 20:
            raise ValueError(number)
        value = int(number) * _UNITS[unit]
    except ValueError:
        raise CanopyError(f"'{text}' is not a message size such as 1M, 16M or 1G.") from None
    if value <= 0:
        raise CanopyError(f"message size '{text}' must be positive.")
    if value > MAX_MESSAGE_BYTES:
        raise CanopyError(f"message size '{text}' is over 1 TiB, the largest Canopy "
                          "simulates (docs/limits.md).")
    return value


def size_label(size: int) -> str:
    """The shortest nccl-tests spelling of ``size`` bytes (``1G``, ``16M``, ``4K``, ``3B``)."""
    for unit in ("G", "M", "K"):
        if size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return f"{size}B"
