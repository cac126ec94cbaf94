"""What the execution model runs: connections, sends and programs, and its units.

A :class:`Connection` is one in-order stream of the runtime over a physical route; a
:class:`Send` moves bytes over one connection once the sends it waits for are delivered. The
rules by which a program runs are in :mod:`canopy.engine.execution.simulate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from canopy.engine.model.errors import ScheduleError

DEFAULT_LATENCY_US = Fraction(1)


BYTES_PER_US_PER_GBPS = 1000          # 1 GB/s = 10^9 B/s = 10^3 B/µs


CUT_THROUGH = "cut-through"


STORE_AND_FORWARD = "store-and-forward"


SWITCH_MODES = (CUT_THROUGH, STORE_AND_FORWARD)


@dataclass(frozen=True)
class Connection:
    """One in-order stream from ``route[0]`` to ``route[-1]`` over the links of ``route``.

    ``weight`` is how many identical parallel channels it stands for: it gets that many
    shares of every link it crosses.
    """

    route: tuple[str, ...]
    weight: Fraction = Fraction(1)


@dataclass(frozen=True)
class Send:
    """``size`` bytes over connection ``connection`` once the sends ``after`` arrived."""

    connection: int
    size: Fraction
    after: tuple[int, ...] = ()


@dataclass
class Program:
    """Connections and sends; a connection's sends are delivered in list order."""

    connections: list[Connection] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    iteration: list[int] = field(default_factory=list)   # loop iteration of each send

    def connect(self, route: tuple[str, ...], weight: Fraction = Fraction(1)) -> int:
        weight = weight if isinstance(weight, Fraction) else Fraction(weight)
        self.connections.append(Connection(tuple(route), weight))
        return len(self.connections) - 1

    def send(self, connection: int, size: Fraction, after: Sequence[int] = ()) -> int:
        self.sends.append(Send(connection, size, tuple(after)))
        return len(self.sends) - 1


@dataclass(frozen=True)
class SimulationResult:
    """Collective time (µs) of a plan at ``message_size`` bytes."""

    time_us: Fraction
    message_size: Fraction
    pieces: int
    messages: int          # sends executed (one per connection crossed per piece)
    periodic: bool = True  # the extrapolation's increments agreed (always for full runs)
    unrolled: int = 0      # iterations of the longest run when extrapolated, else 0
    past_deadline: bool = False   # stopped: it ends after ``time_us`` (a lower bound)

    @property
    def algbw(self) -> Fraction:
        """nccl-tests algbw in GB/s."""
        return algbw_gbps(self.message_size, self.time_us)


def algbw_gbps(size_bytes: Fraction | int, time_us: Fraction) -> Fraction:
    return Fraction(size_bytes) / (Fraction(time_us) * BYTES_PER_US_PER_GBPS)


def link_time(size_bytes: Fraction, bandwidth: Fraction, latency: Fraction) -> Fraction:
    """α + n/B in µs for n bytes over a link of B GB/s and α µs."""
    return latency + Fraction(size_bytes) / (bandwidth * BYTES_PER_US_PER_GBPS)


def check_switch_mode(switch_mode: str) -> None:
    if switch_mode not in SWITCH_MODES:
        raise ScheduleError(f"unknown switch mode '{switch_mode}'; use "
                            f"{' or '.join(SWITCH_MODES)}.")
