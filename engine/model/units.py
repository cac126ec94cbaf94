"""Bandwidth units: a topology file states its unit; the engine works in GB/s.

Internally every bandwidth is an exact :class:`~fractions.Fraction` in GB/s (10^9 bytes
per second, nccl-tests' convention). A file's ``bandwidth_unit`` says how its numbers are
meant; loading multiplies by the unit's exact factor and saving divides by it, so a
round trip gives back the very numbers that were written (every factor is 2^a·10^b, so
the quotients stay terminating decimals):

======  ==========================  ==================
unit    meaning                      in GB/s
======  ==========================  ==================
GB/s    10^9 bytes per second        1
GiB/s   2^30 bytes per second        1.073741824
Gb/s    10^9 bits per second         1/8
Gib/s   2^30 bits per second         0.134217728
======  ==========================  ==================
"""

from __future__ import annotations

from fractions import Fraction

GBPS = "GB/s"
UNIT_FACTORS: dict[str, Fraction] = {
    "GB/s": Fraction(1),
    "GiB/s": Fraction(2**30, 10**9),
    "Gb/s": Fraction(1, 8),
    "Gib/s": Fraction(2**30, 8 * 10**9),
}
UNITS = tuple(UNIT_FACTORS)


def check_unit(unit: object) -> str:
    """``unit`` if Canopy knows it, else ValueError with the accepted spellings."""
    if isinstance(unit, str) and unit in UNIT_FACTORS:
        return unit
    raise ValueError(f"bandwidth_unit {unit!r} is not one of {', '.join(UNITS)}")


def to_gbps(value: Fraction, unit: str) -> Fraction:
    """``value`` stated in ``unit``, in GB/s (exact)."""
    return value * UNIT_FACTORS[unit]


def from_gbps(value: Fraction, unit: str) -> Fraction:
    """A GB/s value expressed in ``unit`` (exact)."""
    return value / UNIT_FACTORS[unit]


def split_unit(text: str) -> tuple[str, str | None]:
    """``"400Gb/s"`` -> ``("400", "Gb/s")``; text with no known unit comes back whole.

    >>> split_unit(" 12.5 GB/s"), split_unit("300")
    (('12.5', 'GB/s'), ('300', None))
    """
    stripped = text.strip()
    for unit in sorted(UNIT_FACTORS, key=len, reverse=True):
        if stripped.endswith(unit):
            return stripped[:-len(unit)].strip(), unit
    return stripped, None
