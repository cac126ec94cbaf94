"""The optimum as an exact function of one link class's bandwidth.

With every other class held, each cut's ratio B+(S) / |S ∩ V_c| is a line in the class
bandwidth B with a slope >= 0, and x*(B) is their minimum (Zhao et al., "ForestColl",
arXiv:2402.06787, §3.1 eq. (1)): concave, piecewise linear and non-decreasing, with
rational breakpoints. Its pieces are found without listing cuts, by the method of
Eisner and Severance for parametric minimum cuts: take the line optimal at B = 0 and the
line optimal as B grows without bound; where the two cross, ask for the minimum cut; if
it is no lower than the two lines there, that crossing is a breakpoint, else its line is
a new piece and both halves are searched again. Each piece costs two cut questions, so
the curve costs about twice its number of pieces; every answer is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.advise.parametric import (
    Cut,
    ParametricNetwork,
    cut_line,
    min_ratio,
    solve_ratio,
)


@dataclass(frozen=True)
class Piece:
    """x*(B) = intercept + slope · B on [start, end] (end None: without bound), with a
    cut that attains it there; x* in GB/s per compute node, B in GB/s per link."""

    start: Fraction
    end: Fraction | None
    intercept: Fraction
    slope: Fraction
    cut: tuple[int, ...]

    def at(self, bandwidth: Fraction) -> Fraction:
        return self.intercept + self.slope * bandwidth


@dataclass(frozen=True)
class ClassCurve:
    """x*(B) of one class (index ``index`` of the network's classes), the other classes
    held at their bandwidths; ``today`` is the class's bandwidth as drawn."""

    index: int
    today: Fraction
    pieces: tuple[Piece, ...]

    def at(self, bandwidth: Fraction) -> Fraction:
        """x* at class bandwidth ``bandwidth`` (the minimum of the pieces' lines)."""
        return min(p.at(bandwidth) for p in self.pieces)

    @property
    def breakpoints(self) -> list[Fraction]:
        return [p.start for p in self.pieces[1:]]

    def piece_at(self, bandwidth: Fraction) -> Piece:
        """The piece holding ``bandwidth`` (the right one at a breakpoint)."""
        for p in self.pieces:
            if p.end is None or bandwidth < p.end:
                return p
        return self.pieces[-1]

    @property
    def threshold(self) -> Fraction:
        """The lowest class bandwidth that keeps today's optimum."""
        last = self.pieces[-1]
        if last.slope == 0 and last.start <= self.today:
            return last.start
        return self.today

    @property
    def limits(self) -> bool:
        """Whether raising this class alone raises the optimum."""
        return self.piece_at(self.today).slope > 0

    @property
    def saturation(self) -> Fraction | None:
        """The bandwidth past which raising the class gains nothing (None: it always
        gains)."""
        last = self.pieces[-1]
        return last.start if last.slope == 0 else None


@dataclass(frozen=True)
class _Line:
    intercept: Fraction
    slope: Fraction
    cut: tuple[int, ...]

    def at(self, bandwidth: Fraction) -> Fraction:
        return self.intercept + self.slope * bandwidth


def class_curve(pnet: ParametricNetwork, c: int,
                bandwidths: list[Fraction] | None = None) -> ClassCurve:
    """The exact curve x*(B) of class ``c``, the others at ``bandwidths`` (default:
    today's)."""
    base = list(pnet.today() if bandwidths is None else bandwidths)

    def line(cut: Cut) -> _Line:
        intercept, slope = cut_line(pnet, cut.nodes, base, c)
        return _Line(intercept, slope, cut.nodes)

    def at(bandwidth: Fraction | None, start: tuple[int, ...] | None) -> Cut | None:
        settings: list[Fraction | None] = list(base)
        settings[c] = bandwidth
        return solve_ratio(pnet, settings, start)

    first = at(Fraction(0), None)
    assert first is not None
    left = line(first)
    far = at(None, left.cut)
    if far is None:
        # every cut crosses the class: the last piece is the line of least slope (ties
        # broken by the search below, which keeps the lower of two parallel lines)
        caps = [terms.get(c, Fraction(0)) for terms in pnet.terms]
        steepest = min_ratio(pnet.n, pnet.compute, pnet.edges, caps, pnet.representatives())
        assert steepest is not None
        right = line(steepest)
    else:
        right = line(far)

    def search(a: _Line, b: _Line) -> list[_Line]:
        if a.slope <= b.slope:
            return [a] if a.at(Fraction(0)) <= b.at(Fraction(0)) else [b]
        crossing = (b.intercept - a.intercept) / (a.slope - b.slope)
        found = at(crossing, a.cut)
        assert found is not None
        if found.ratio >= a.at(crossing):
            return [a, b]
        middle = line(found)
        return search(a, middle)[:-1] + search(middle, b)

    lines = search(left, right)
    pieces: list[Piece] = []
    start = Fraction(0)
    for i, ln in enumerate(lines):
        end = None
        if i + 1 < len(lines):
            nxt = lines[i + 1]
            end = (nxt.intercept - ln.intercept) / (ln.slope - nxt.slope)
        if end is not None and end <= start:
            continue            # a line that is optimal at one point only
        pieces.append(Piece(start, end, ln.intercept, ln.slope, ln.cut))
        if end is not None:
            start = end
    return ClassCurve(c, base[c], tuple(pieces))
