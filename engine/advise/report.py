"""The design advice of a topology: per link class, upgrades, failures and a target, as
canopy-advice JSON (docs/advise.md) and as text.

Optima are nccl-tests algbw in GB/s: N·x* for allgather and reduce-scatter (Zhao et al.,
"ForestColl", arXiv:2402.06787, §3.1 and §4.6: a reduce-scatter runs the allgather's
trees reversed), N·x*/2 for allreduce run as reduce-scatter then allgather (§4.6). The
allreduce LP of App. E can beat that bound on some networks; the advice stays with the
reduce-scatter + allgather optimum, exact, and says so.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from canopy.engine.advise.curves import ClassCurve, class_curve
from canopy.engine.advise.failures import Failure, failure_scan
from canopy.engine.advise.parametric import ParametricNetwork, solve_ratio
from canopy.engine.advise.target import TargetAnswer, cheapest_upgrade
from canopy.engine.forestcoll.bottleneck_words import describe_cut
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.topology import Topology, format_gbps, format_number

FORMAT = "canopy-advice"
VERSION = 1
ALLREDUCE_NOTE = ("allreduce optimum taken as reduce-scatter + allgather (ForestColl §4.6): "
                  "half the allgather algbw; the App. E allreduce LP (canopy solve "
                  "--collective allreduce) can be higher on some networks")
UNITS = {
    "optimum": "GB/s (nccl-tests algbw of the collective)",
    "bandwidth": "GB/s per link per direction (a class's widest link; its other links "
                 "scale with it)",
    "gain": "GB/s (algbw)",
    "loss_percent": "% of today's optimum",
    "gain_percent": "% of today's optimum",
    "price": "the price file's currency (its prices are per GB/s per link)",
    "gain_per_price": "GB/s (algbw) per unit of price",
}


def exact(value: Fraction) -> str:
    """An exact number as text: an integer, a short decimal, or "p/q"."""
    return str(format_number(value))


def algbw_factor(collective: str, n: int) -> Fraction:
    """algbw per unit of x* (GB/s per GB/s per compute node)."""
    if collective not in COLLECTIVES:
        raise CanopyError(f"unknown collective '{collective}'; use one of "
                          f"{', '.join(COLLECTIVES)}.")
    return Fraction(n, 2) if collective == "allreduce" else Fraction(n)


def read_prices(pnet: ParametricNetwork, prices: dict[str, Any],
                where: str = "the price file") -> dict[int, Fraction]:
    """Class index -> price per GB/s per link, from a name -> number mapping; unknown
    classes, non-numbers and negative prices are refused in one sentence."""
    from canopy.engine.model.topology import parse_bandwidth

    chosen: dict[int, Fraction] = {}
    for name, value in prices.items():
        names = [lc.name for lc in pnet.classes]
        if name not in names:
            known = ", ".join(f"'{n}'" for n in names)
            raise CanopyError(f"{where} names class '{name}', which the topology does not "
                              f"have (its classes: {known}).")
        c = names.index(name)
        try:
            chosen[c] = parse_bandwidth(value)
        except ValueError as exc:
            if "positive" in str(exc):
                raise CanopyError(f"{where}: class '{name}' has a negative or zero price "
                                  f"({value}); a price is a positive number per GB/s per "
                                  "link.") from None
            raise CanopyError(f"{where}: the price of class '{name}' ({value!r}) {exc}.") \
                from None
    if not chosen:
        raise CanopyError(f"{where} names no link class of the topology.")
    return chosen


class Advisor:
    """Everything ``canopy advise`` computes about one topology and collective."""

    def __init__(self, topology: Topology, collective: str = "allgather",
                 where: str = "") -> None:
        self.topology = topology
        self.collective = collective
        self.where = where
        self.pnet = ParametricNetwork.from_topology(topology, where)
        self.factor = algbw_factor(collective, len(self.pnet.compute))
        cut = solve_ratio(self.pnet, self.pnet.today())
        assert cut is not None
        self.bottleneck = cut
        self.curves: list[ClassCurve] = []
        self.failures: list[Failure] | None = None
        self.target: TargetAnswer | None = None
        self.target_algbw: Fraction | None = None
        self.prices: dict[int, Fraction] = {}

    @property
    def optimum(self) -> Fraction:
        return self.bottleneck.ratio * self.factor

    def compute_curves(self, progress: Progress | None = None) -> None:
        self.curves = []
        for c in range(len(self.pnet.classes)):
            report(progress, "class curves", c / max(1, len(self.pnet.classes)))
            self.curves.append(class_curve(self.pnet, c))

    def compute_failures(self, progress: Progress | None = None) -> None:
        def step(fraction: float) -> None:
            report(progress, "failures", fraction)
        self.failures = failure_scan(self.pnet, start=self.bottleneck.nodes, progress=step)

    def compute_target(self, algbw: Fraction, prices: dict[int, Fraction]) -> None:
        self.target_algbw = algbw
        self.prices = prices
        self.target = cheapest_upgrade(self.pnet, algbw / self.factor, prices)

    # ------------------------------------------------------------ upgrades

    def bottleneck_classes(self) -> list[int]:
        """Classes with a link leaving today's bottleneck cut."""
        found: set[int] = set()
        for j in self.pnet.crossing(self.bottleneck.nodes):
            found.update(self.pnet.terms[j])
        return sorted(found)

    def upgrades(self) -> list[dict[str, Any]]:
        """Each class raised to double (or to where it stops gaining, when sooner), and
        together doubled the classes that cannot drop without loss and those crossing the
        bottleneck cut; best gain (per price when priced) first."""
        today = self.pnet.today()
        options: list[dict[int, Fraction]] = []
        for curve in self.curves:
            top = 2 * curve.today
            if curve.saturation is not None and curve.today < curve.saturation < top:
                top = curve.saturation
            options.append({curve.index: top})
        tight = {curve.index for curve in self.curves if curve.threshold == curve.today}
        joint = sorted(tight | set(self.bottleneck_classes()))
        if len(joint) > 1:
            options.append({c: 2 * today[c] for c in joint})
        rows = []
        for option in options:
            settings: list[Fraction | None] = list(today)
            for c, b in option.items():
                settings[c] = b
            if len(option) == 1 and self.curves:
                (c, b), = option.items()
                ratio = self.curves[c].at(b)
            else:
                cut = solve_ratio(self.pnet, settings, self.bottleneck.nodes)
                assert cut is not None
                ratio = cut.ratio
            optimum = ratio * self.factor
            gain = optimum - self.optimum
            row: dict[str, Any] = {
                "classes": [self.pnet.classes[c].name for c in option],
                "bandwidths": {self.pnet.classes[c].name: exact(b) for c, b in option.items()},
                "optimum": exact(optimum), "gain": exact(gain),
                "gain_percent": round(float(100 * gain / self.optimum), 3)}
            if self.prices and all(c in self.prices for c in option):
                price = sum((self.prices[c] * len(self.pnet.classes[c].links) * (b - today[c])
                             for c, b in option.items()), Fraction(0))
                row["price"] = exact(price)
                row["gain_per_price"] = exact(gain / price) if price else None
            rows.append(row)

        def rank(row: dict[str, Any]) -> tuple:
            per = row.get("gain_per_price")
            return (-(Fraction(per) if per is not None else Fraction(-1)) if self.prices
                    else 0, -Fraction(row["gain"]), row["classes"])
        return sorted(rows, key=rank)

    # ------------------------------------------------------------ output

    def names(self, cut: tuple[int, ...]) -> list[str]:
        return [self.pnet.names[i] for i in cut]

    def cut_text(self, cut: tuple[int, ...], settings: list[Fraction] | None = None) -> str:
        caps = self.pnet.capacities(settings or self.pnet.today())
        out = sum((cap for j in self.pnet.crossing(cut) if (cap := caps[j]) is not None),
                  Fraction(0))
        return describe_cut(self.topology, self.names(cut), out)

    def to_dict(self) -> dict[str, Any]:
        """The canopy-advice JSON object (docs/advise.md)."""
        data: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "topology": self.topology.name,
            "collective": self.collective, "units": UNITS,
            "optimum": float(self.optimum), "optimum_exact": exact(self.optimum),
            "bottleneck": {"nodes": self.names(self.bottleneck.nodes),
                           "classes": [self.pnet.classes[c].name
                                       for c in self.bottleneck_classes()],
                           "text": self.cut_text(self.bottleneck.nodes)},
        }
        if self.collective == "allreduce":
            data["optimum_note"] = ALLREDUCE_NOTE
        data["classes"] = [self._class_dict(c) for c in range(len(self.pnet.classes))]
        data["upgrades"] = self.upgrades() if self.curves else []
        if self.failures is not None:
            data["failures"] = [self._failure_dict(f) for f in self.failures]
        if self.target is not None and self.target_algbw is not None:
            answer = self.target
            data["target"] = {
                "requested": exact(self.target_algbw),
                "optimum": exact(answer.ratio * self.factor), "price": exact(answer.price),
                "bandwidths": {lc.name: exact(b) for lc, b in
                               zip(self.pnet.classes, answer.bandwidths, strict=True)},
                "changed": [lc.name for lc, b in zip(self.pnet.classes, answer.bandwidths,
                                                      strict=True) if b != lc.bandwidth],
                "bottleneck": {"nodes": self.names(answer.cut),
                               "text": self.cut_text(answer.cut, answer.bandwidths)},
                "rounds": answer.rounds}
        return data

    def _class_dict(self, c: int) -> dict[str, Any]:
        lc = self.pnet.classes[c]
        out: dict[str, Any] = {"name": lc.name, "named": lc.named,
                               "links": [list(p) for p in lc.link_pairs(self.topology)],
                               "bandwidth": exact(lc.bandwidth)}
        if c < len(self.curves):
            curve = self.curves[c]
            points = [(Fraction(0), False)] + [(b, True) for b in curve.breakpoints]
            end = 2 * max([curve.today, *curve.breakpoints])
            points.append((end, False))
            out.update({
                "limits_optimum": curve.limits,
                "keeps_optimum_down_to": exact(curve.threshold),
                "optimum_at_double": exact(curve.at(2 * curve.today) * self.factor),
                "saturates_at": None if curve.saturation is None else exact(curve.saturation),
                "curve": [{"bandwidth": exact(b), "optimum": exact(curve.at(b) * self.factor),
                           "breakpoint": bp} for b, bp in points]})
        return out

    def _failure_dict(self, f: Failure) -> dict[str, Any]:
        optimum = f.ratio * self.factor
        return {"element": f.element, "alike": f.alike, "optimum": exact(optimum),
                "loss_percent": round(float(100 * (1 - optimum / self.optimum)), 3),
                "cut": self.names(f.cut)}

    def text(self) -> str:
        """The summary ``canopy advise`` prints."""
        lines = [f"collective:      {self.collective}",
                 f"optimum:         {format_gbps(self.optimum)} GB/s "
                 f"({exact(self.optimum)} exactly)",
                 f"bottleneck:      {self.cut_text(self.bottleneck.nodes)}"]
        if self.collective == "allreduce":
            lines.append(f"note:            {ALLREDUCE_NOTE}.")
        if self.curves:
            lines.append("classes (bandwidth per link; optimum in GB/s):")
            width = max(len(lc.name) for lc in self.pnet.classes)
            for lc, curve in zip(self.pnet.classes, self.curves, strict=True):
                state = "LIMITS" if curve.limits else "slack "
                lines.append(
                    f"  {lc.name:<{width}}  {len(lc.links):>5} links at "
                    f"{format_gbps(lc.bandwidth)} GB/s  {state}  keeps the optimum down to "
                    f"{format_gbps(curve.threshold)} GB/s; doubled: "
                    f"{format_gbps(curve.at(2 * curve.today) * self.factor)} GB/s")
            lines.append("upgrades (best first):")
            for row in self.upgrades():
                change = ", ".join(f"{k} -> {format_gbps(Fraction(v))} GB/s"
                                   for k, v in row["bandwidths"].items())
                price = f"; price {row['price']}" if "price" in row else ""
                lines.append(f"  {change}: {format_gbps(Fraction(row['optimum']))} GB/s "
                             f"(+{row['gain_percent']:g} %){price}")
        if self.failures is not None:
            lines.append("failures (worst first):")
            for f in self.failures[:10]:
                d = self._failure_dict(f)
                alike = f" (and {f.alike - 1} alike)" if f.alike > 1 else ""
                lines.append(f"  {f.element}{alike}: {format_gbps(Fraction(d['optimum']))} "
                             f"GB/s (-{d['loss_percent']:g} %)")
            if len(self.failures) > 10:
                lines.append(f"  ... {len(self.failures) - 10} more classes of elements "
                             "(--json for all)")
        if self.target is not None:
            t = self.target
            changes = [f"{lc.name} {format_gbps(lc.bandwidth)} -> {format_gbps(b)} GB/s"
                       for lc, b in zip(self.pnet.classes, t.bandwidths, strict=True)
                       if b != lc.bandwidth]
            lines.append(f"target:          {format_gbps(t.ratio * self.factor)} GB/s for "
                         f"price {format_gbps(t.price)}: "
                         f"{'; '.join(changes) or 'no change needed'}")
            lines.append(f"new bottleneck:  {self.cut_text(t.cut, t.bandwidths)}")
        return "\n".join(lines)


def advise(topology: Topology, collective: str = "allgather", failures: bool = False,
           target: Fraction | None = None, prices: dict[str, Any] | None = None,
           where: str = "", progress: Progress | None = None,
           curves: bool = True, prices_source: str = "the price file") -> Advisor:
    """Compute the advice: class curves, upgrades, and optionally failures and a target
    (algbw GB/s, with ``prices`` per class name)."""
    advisor = Advisor(topology, collective, where)
    if target is not None:
        if prices is None:
            raise CanopyError("--target needs --prices (a JSON object of class: price).")
        advisor.compute_target(target, read_prices(advisor.pnet, prices, prices_source))
    elif prices is not None:
        advisor.prices = read_prices(advisor.pnet, prices, prices_source)
    if curves:
        advisor.compute_curves(progress)
    if failures:
        advisor.compute_failures(progress)
    return advisor

