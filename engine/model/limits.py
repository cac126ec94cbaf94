"""The documented limits on what Canopy reads (README "Limits", docs of canopy-topology).

Every number and file Canopy reads is checked against these before any work starts, so an
absurd input is refused with one sentence instead of running for minutes or exhausting
memory (a bandwidth of ``1e999999999`` is an integer of a billion digits; 100,000 nested
``[`` overflow Python's stack).

* A number (bandwidth, latency) is written with at most :data:`MAX_DIGITS` digits and its
  decimal exponent lies within ±:data:`MAX_EXPONENT`: every positive value from 1e-1000 to
  1e1000 is accepted and stays exact (the engine switches to Python integers past int64).
* A topology holds at most :data:`MAX_NODES` nodes and :data:`MAX_LINKS` links.
* A file (JSON, GraphML, NCCL XML) is at most :data:`MAX_FILE_BYTES` bytes.
* JSON nested deeper than Python's parser allows (about 1000 levels) is refused.

Results can be longer than any input: the k of ForestColl's Prop. 3 (arXiv:2402.06787) for
six links with 1000-digit bandwidths has about 5000 digits, past the 4300 digits Python
converts to text by default. :func:`allow_long_integers` (called by the ``canopy`` command
and the editor) raises that limit to :data:`LONG_DIGITS`, enough for such results and still
quick to convert; :func:`number_text` prints them for people as about 6 significant digits
and their length, and JSON keeps them exact. A result longer still is reported in one
sentence (:data:`TOO_LONG_TEXT`).
"""

from __future__ import annotations

import sys
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING

from canopy.engine.model.errors import TopologyError

if TYPE_CHECKING:
    from canopy.engine.model.topology import Topology

MAX_DIGITS = 1000
MAX_EXPONENT = 1000
MAX_NODES = 100_000
MAX_LINKS = 1_000_000
MAX_BUILT_NODES = 50_000      # what a generator or an importer makes
MAX_BUILT_LINKS = 400_000
MAX_FILE_BYTES = 32 * 1024 * 1024

RANGE_TEXT = (f"Canopy reads numbers of at most {MAX_DIGITS} digits between "
              f"1e-{MAX_EXPONENT} and 1e{MAX_EXPONENT}")


LONG_DIGITS = 100_000
"""Digits of the longest integer Canopy converts to or from text (results, schedules)."""
SHORT_DIGITS = 40
"""Exact numbers longer than this are printed for people as an approximation."""
TOO_LONG_TEXT = (f"a result has more than {LONG_DIGITS:,} digits, too long to print or "
                 "write; Canopy computes it exactly but cannot show it (try fewer distinct "
                 "bandwidths or shorter ones).")


SIMULATED_RANGE = (Fraction(1, 10**100), Fraction(10**100))
"""Bandwidths (GB/s) the α-β simulator takes: it works in floating point, so a link of
1e-999 GB/s, which the exact solver handles, would take zero or infinite time there."""


def simulable(topology: Topology) -> bool:
    """Whether every bandwidth of ``topology`` lies in :data:`SIMULATED_RANGE`."""
    low, high = SIMULATED_RANGE
    return all(low <= link.bandwidth <= high for link in topology.links)


def check_simulable(topology: Topology, where: str = "") -> None:
    """Raise TopologyError naming a link whose bandwidth is outside :data:`SIMULATED_RANGE`."""
    from canopy.engine.model.topology import format_gbps  # topology imports this module

    low, high = SIMULATED_RANGE
    for link in topology.links:
        if not low <= link.bandwidth <= high:
            at = f"{where}: " if where else ""
            raise TopologyError(
                f"{at}link {link.source} -> {link.target} has {format_gbps(link.bandwidth)} "
                "GB/s; the α-β simulator works in floating point and takes bandwidths from "
                "1e-100 to 1e100 GB/s (the exact solve takes any).")


def allow_long_integers() -> None:
    """Let Python convert integers of up to :data:`LONG_DIGITS` digits to and from text
    (its default stops at 4300; every input number is checked against :data:`MAX_DIGITS`
    before it is converted, so this only lengthens results)."""
    if 0 < sys.get_int_max_str_digits() < LONG_DIGITS:
        sys.set_int_max_str_digits(LONG_DIGITS)


def is_too_long_error(error: BaseException) -> bool:
    """Whether ``error`` is Python refusing to convert a too long integer to text."""
    return isinstance(error, ValueError) and "integer string conversion" in str(error)


def check_integer_text(text: str, limit: int = MAX_DIGITS) -> None:
    """Raise ValueError when an integer literal is longer than ``limit`` digits."""
    digits = len(text.lstrip("+-"))
    if digits > limit:
        raise ValueError(f"has {digits} digits; " + (RANGE_TEXT if limit == MAX_DIGITS else
                         f"Canopy reads integers of at most {limit} digits"))


def digit_count(n: int) -> int:
    """Decimal digits of |n|, without converting it to text."""
    n = abs(n)
    digits = max(1, int(n.bit_length() * 0.30102999566398120))
    while n >= 10**digits:
        digits += 1
    while digits > 1 and n < 10**(digits - 1):
        digits -= 1
    return digits


def number_text(value: Fraction | int) -> str:
    """An exact number for people: as it is ("p/q") up to :data:`SHORT_DIGITS` digits,
    else about 6 significant digits and the exact value's length.

    >>> number_text(Fraction(1040, 3))
    '1040/3'
    >>> number_text(7**100)
    'about 3.23448e+84 (an integer of 85 digits)'
    >>> number_text(Fraction(1, 3**100))
    'about 1.94033e-48 (p/q of 1 and 48 digits)'
    """
    value = Fraction(value)
    num, den = value.numerator, value.denominator
    top, bottom = digit_count(num), digit_count(den)
    if top + (bottom if den != 1 else 0) <= SHORT_DIGITS:
        return str(value)
    with localcontext(Context(prec=6, Emax=10**17, Emin=-10**17)):
        approx = Decimal(num) / Decimal(den)
    what = f"an integer of {top} digits" if den == 1 else f"p/q of {top} and {bottom} digits"
    return f"about {approx:.5e} ({what})"


def check_decimal(value: Decimal) -> None:
    """Raise ValueError when a finite decimal is outside the documented range."""
    sign, digits, exponent = value.as_tuple()
    if len(digits) > MAX_DIGITS:
        raise ValueError(f"has {len(digits)} digits; {RANGE_TEXT}")
    if value and not -MAX_EXPONENT <= value.adjusted() <= MAX_EXPONENT:
        raise ValueError(f"is outside the range 1e-{MAX_EXPONENT} to 1e{MAX_EXPONENT}")
