"""The documented limits on what Canopy reads (README "Limits", docs of canopy-topology).

Every number and file Canopy reads is checked against these before any work starts, so
an absurd input is refused with one sentence instead of running for minutes or exhausting
memory (issue 15: a bandwidth of ``1e999999999`` grew to 485 MB; 100,000 nested ``[``
overflowed Python's stack).

* A number (bandwidth, latency) is written with at most :data:`MAX_DIGITS` digits and its
  decimal exponent lies within ±:data:`MAX_EXPONENT`: every positive value from 1e-1000 to
  1e1000 is accepted and stays exact (the engine switches to Python integers past int64).
* A topology holds at most :data:`MAX_NODES` nodes and :data:`MAX_LINKS` links.
* A file (JSON, GraphML, NCCL XML) is at most :data:`MAX_FILE_BYTES` bytes.
* JSON nested deeper than Python's parser allows (about 1000 levels) is refused.
"""

from __future__ import annotations

from decimal import Decimal

MAX_DIGITS = 1000
MAX_EXPONENT = 1000
MAX_NODES = 100_000
MAX_LINKS = 1_000_000
MAX_FILE_BYTES = 32 * 1024 * 1024

RANGE_TEXT = (f"Canopy reads numbers of at most {MAX_DIGITS} digits between "
              f"1e-{MAX_EXPONENT} and 1e{MAX_EXPONENT}")


def check_integer_text(text: str) -> None:
    """Raise ValueError when an integer literal is longer than :data:`MAX_DIGITS` digits."""
    digits = len(text.lstrip("+-"))
    if digits > MAX_DIGITS:
        raise ValueError(f"has {digits} digits; {RANGE_TEXT}")


def check_decimal(value: Decimal) -> None:
    """Raise ValueError when a finite decimal is outside the documented range."""
    sign, digits, exponent = value.as_tuple()
    if len(digits) > MAX_DIGITS:
        raise ValueError(f"has {len(digits)} digits; {RANGE_TEXT}")
    if value and not -MAX_EXPONENT <= value.adjusted() <= MAX_EXPONENT:
        raise ValueError(f"is outside the range 1e-{MAX_EXPONENT} to 1e{MAX_EXPONENT}")
