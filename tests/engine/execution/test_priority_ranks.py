"""A plan's send priorities are ranked by exact value: over their common denominator,
or as Fractions where that denominator is large; shared objects and equal values alike."""

from fractions import Fraction

from canopy.engine.execution.compiler import _ranks


def _by_fractions(priorities):
    values = sorted(set(priorities))
    return {id(p): values.index(p) for p in priorities}


def test_ranks_are_those_of_the_exact_values():
    # ticks of a timetable (one object per tick, shared), an equal value in another
    # object, the default 0 and two values 10**-24 apart
    ticks = [Fraction(t, 384) for t in (5, 1, 3, 5 * 384, 2)]
    equal = Fraction(10, 768)
    close = [Fraction(1, 10**12), Fraction(10**12 - 1, 10**24)]
    priorities = [ticks[0], ticks[1], ticks[0], equal, Fraction(0), *ticks, *close]
    ranks = _ranks(priorities)
    assert ranks == _by_fractions(priorities)
    assert ranks[id(ticks[0])] == ranks[id(equal)]
    assert ranks[id(close[1])] < ranks[id(close[0])] < ranks[id(ticks[1])]


def test_a_large_common_denominator_ranks_the_same():
    primes = [p for p in range(2, 2000) if all(p % q for q in range(2, int(p**0.5) + 1))]
    priorities = [Fraction(k % 7, p) for k, p in enumerate(primes)]    # lcm of 300 primes
    assert _ranks(priorities) == _by_fractions(priorities)
