"""Option types with the documented limits of docs/limits.md (canopy.engine.model.limits)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``, else one sentence."""

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-")
        try:
            value = int(text) if len(digits) <= 30 else None
        except ValueError:
            value = None
        shown = text if len(text) <= 40 else f"{text[:20]}…"
        if (value is None and not digits.isdigit()) or (value is not None and value < low):
            what = "a positive integer" if low == 1 else f"a whole number from {low:,}"
            raise argparse.ArgumentTypeError(f"'{shown}' is not {what}")
        if value is None or value > high:
            raise argparse.ArgumentTypeError(
                f"'{shown}' is over the limit of {high:,} (docs/limits.md)")
        return value

    parse.__name__ = "whole number"
    return parse
