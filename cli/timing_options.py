"""``--topology`` and ``--size`` of the commands that check a runtime file and time it
(``canopy check-xml``, ``canopy check-plan``): the options, the size read once, and the
line that reports the time."""

from __future__ import annotations

import argparse
from typing import Any

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.sizes import parse_size, size_label


def add_timing_arguments(p: argparse.ArgumentParser, what: str, size_help: str) -> None:
    """``--topology TOPO`` (also time ``what`` on it) and ``--size`` (default 1G)."""
    p.add_argument("--topology", metavar="TOPO",
                   help=f"canopy-topology JSON: also {what} on it (rank r runs on the r-th "
                        "compute node)")
    p.add_argument("--size", default="1G", help=f"{size_help} (default 1G)")


def timing_size(args: argparse.Namespace) -> int:
    """The bytes ``--size`` names, or a CanopyError naming the option."""
    try:
        return parse_size(args.size)
    except CanopyError as exc:
        raise CanopyError(f"--size: {exc}") from None


def timing_line(size: int, topology: str, timing: Any, iterations: str) -> str:
    """``size on TOPO: time, algbw (N iterations, connections, messages)``; ``timing``
    has ``time_us``, ``algbw``, ``iterations``, ``connections`` and ``messages``."""
    return (f"{size_label(size)} on {topology}: {float(timing.time_us):.1f} µs, algbw "
            f"{float(timing.algbw):.2f} GB/s ({timing.iterations} {iterations} iteration"
            f"{'s' if timing.iterations != 1 else ''}, {timing.connections} connections, "
            f"{timing.messages} messages)")
