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

from canopy.engine.model.errors import CanopyError, TopologyError

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


# --- Parameters (options of every command, values of every file); docs/limits.md ---------

MAX_K = 10**15
"""Trees per compute node a fixed k may ask for (the work does not grow with k)."""
MAX_MESSAGE_BYTES = 1 << 40
"""Largest message size (1 TiB) of --size, --sizes, a sweep's sizes and a job's size."""
MAX_SIZES = 64
"""Message sizes one list (--sizes, a sweep's sizes) may hold."""
MAX_TIME_STEPS = 256
"""Store-and-forward steps of the all-to-all time-stepped LP (--time-steps)."""
MAX_LP_NONZEROS = 10_000_000
"""Constraint-matrix entries of an LP Canopy builds (about 1 GB while it is built)."""
MAX_SEEDS = 1000
"""ECMP hash seeds of canopy fabric, and TACOS seeds of canopy compare."""
MAX_TACOS_CHUNKS = 64
"""Chunks per GPU a TACOS baseline is synthesised with (--tacos-chunks)."""
MAX_CHANNELS = 32
"""MSCCL channels (--msccl-channels): the runtime's MAXCHANNELS."""
MAX_SMS = 1024
"""SMs (thread blocks resident at once) per GPU (--msccl-sms, --sms)."""
MAX_CAPACITY = 1 << 20
"""Messages a connection buffers in check-xml's symbolic run (--capacity)."""
MAX_ITERATIONS = 4096
"""Loop iterations an MSCCL XML is timed with (check-xml --iterations)."""
MAX_LATENCY_US = 10**6
"""Latency per hop, in µs, of compare's α-β model (--latency): one second."""
MAX_WORKERS = 256
"""Sweep points run at once on this machine (sweep --workers)."""

MEMORY_BUDGET = 4 << 30
"""Memory (resident bytes) one command or engine job may use: 4 GiB, which a full solve
reaches at about 6,000 GPUs (1.4 GB at 4096). ``$CANOPY_MEMORY_BUDGET`` (bytes, or with
a K/M/G suffix) changes it; a computation that would pass it is refused first where its
size is known beforehand (:func:`check_memory`), and stopped with one sentence when it
gets there otherwise (:mod:`canopy.engine.process.memory_guard`)."""
SOLVE_BYTES_PER_PAIR = 96
"""Peak memory of a full solve per ordered pair of compute nodes (N·(N-1) tree edges at
k = 1; 1.4 GB at 4096 GPUs)."""
COMPARE_BASE_BYTES = 250 << 20
COMPARE_BYTES_PER_GPU = (36 << 20) // 10
"""Peak memory of a comparison: a base, and per GPU besides its ForestColl solve (the
baselines' schedules and the simulator's sends grow about linearly with the GPUs;
docs/limits.md has the measurements)."""
FABRIC_BYTES_PER_PAIR = 3 << 10
"""Peak memory of a fabric analysis per ordered pair of GPUs within one job: the job's
ForestColl solve, and its plan's flows, held for every job while all are routed together
(3 KiB, rounded up from about 2.5 KB measured on two jobs of 256 and of 512 GPUs;
docs/limits.md)."""
LP_BYTES_PER_ENTRY = 1000
"""Peak memory per constraint-matrix entry of the all-to-all and allreduce LPs: the
matrix as built, HiGHS's copy and factorisation of it, and the exact schedule made from
its answer (docs/limits.md has the measurements this is rounded up from)."""


class LimitError(CanopyError):
    """A parameter past its documented limit."""


def memory_budget() -> int:
    """:data:`MEMORY_BUDGET`, or ``$CANOPY_MEMORY_BUDGET`` when set to a size."""
    import os
    text = os.environ.get("CANOPY_MEMORY_BUDGET", "").strip().upper().removesuffix("B")
    if not text:
        return MEMORY_BUDGET
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:], 1)
    try:
        value = int(float(text.rstrip("KMGT")) * scale)
    except ValueError:
        raise LimitError(f"CANOPY_MEMORY_BUDGET={text!r} is not a size such as 8G.") from None
    if value < 64 << 20:
        raise LimitError("CANOPY_MEMORY_BUDGET is below 64 MB, too little for any command.")
    return value


def gigabytes(n: int) -> str:
    """``n`` bytes as '1.5 GiB' (or '200 MiB' below a GiB)."""
    return f"{n / 2**30:.3g} GiB" if n >= 1 << 30 else f"{n / 2**20:.0f} MiB"


def check_memory(what: str, needed: int, hint: str = "") -> None:
    """Raise LimitError (one sentence) when ``what`` would need more than the memory
    budget: ``needed`` is its estimate in bytes."""
    budget = memory_budget()
    if needed > budget:
        raise LimitError(f"{what} would need about {gigabytes(needed)} of memory, over "
                         f"Canopy's budget of {gigabytes(budget)} (docs/limits.md; "
                         f"CANOPY_MEMORY_BUDGET raises it){'; ' + hint if hint else ''}.")


def check_range(what: str, value: int | float | Fraction, low: int | float | Fraction,
                high: int | float | Fraction, unit: str = "") -> None:
    """Raise LimitError unless low <= value <= high, naming ``what`` and the limits."""
    if not low <= value <= high:
        unit = f" {unit}" if unit else ""
        raise LimitError(f"{what} must be from {low:,}{unit} to {high:,}{unit} "
                         f"(docs/limits.md), not {_short(value)}{unit}.")


def _short(value: int | float | Fraction) -> str:
    if isinstance(value, int) and abs(value) >= 10**40:
        return number_text(value)
    return f"{value:,}" if isinstance(value, int) else str(value)
