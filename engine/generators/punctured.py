"""Punctured fabrics: a generated topology with k random links removed (failures).

Basu et al. (arXiv:2309.13541), Fig. 5: all-to-all throughput on a 3-D torus with a few
links removed at random ("punctured"). :func:`puncture` removes ``removed`` links chosen by
a seeded random generator from any topology, so the same seed gives the same fabric; the
``punctured-torus`` and ``punctured-kautz`` generators apply it to a torus and to a
generalised Kautz graph (the paper's expander). A duplex link goes as a whole, so a torus
stays balanced; a Kautz arc is one-way, so its ends lose one direction each (all-to-all does
not need balanced nodes). A removal that disconnects the network is refused.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction

from canopy.engine.generators.direct import kautz, torus
from canopy.engine.generators.params import (
    BANDWIDTH,
    BANDWIDTHS,
    DIMS,
    INT,
    ParameterError,
    ParamSpec,
)
from canopy.engine.model.topology import Topology, find_problems


def puncture(topo: Topology, removed: int, seed: int) -> Topology:
    """``topo`` without ``removed`` of its links (chosen with ``random.Random(seed)``)."""
    if removed > len(topo.links):
        raise ParameterError(f"cannot remove {removed} links from a topology with "
                             f"{len(topo.links)}.")
    gone = set(random.Random(seed).sample(range(len(topo.links)), removed))
    topo.links = [link for i, link in enumerate(topo.links) if i not in gone]
    topo.name += f", {removed} link{'s' if removed != 1 else ''} removed (seed {seed})"
    for problem in find_problems(topo):
        if "cannot" in problem.message:
            raise ParameterError(f"removing {removed} links with seed {seed} disconnects the "
                                 f"network ({problem.message.rstrip('.')}); try another seed.")
    return topo


def punctured_torus(dims: Sequence[int], bandwidth: Sequence[Fraction], removed: int,
                    seed: int) -> Topology:
    """A torus with ``removed`` random duplex links taken out (Fig. 5's punctured torus)."""
    return puncture(torus(dims, bandwidth), removed, seed)


PUNCTURED_TORUS_PARAMS = (
    ParamSpec("dims", DIMS, (4, 4, 4), "size of each dimension, e.g. 4x4x4", minimum=1),
    ParamSpec("bandwidth", BANDWIDTHS, (Fraction(50),),
              "link bandwidth per direction, GB/s: one value, or one per dimension"),
    ParamSpec("removed", INT, 3, "how many random links to remove", minimum=0),
    ParamSpec("seed", INT, 0, "random seed choosing the links", minimum=0),
)


def punctured_kautz(degree: int, n: int, bandwidth: Fraction, removed: int, seed: int
                    ) -> Topology:
    """GK(degree, n) with ``removed`` random one-way arcs taken out (the experiment of Basu
    et al., arXiv:2309.13541, Fig. 5, on their GenKautz expander)."""
    return puncture(kautz(degree, n, bandwidth), removed, seed)


PUNCTURED_KAUTZ_PARAMS = (
    ParamSpec("degree", INT, 2, "out-degree d of each node", minimum=2),
    ParamSpec("n", INT, 12, "number of compute nodes", minimum=3),
    ParamSpec("bandwidth", BANDWIDTH, Fraction(50), "bandwidth of each arc (one-way), GB/s"),
    ParamSpec("removed", INT, 0, "how many random arcs to remove (their ends become "
              "unbalanced, which all-to-all allows and ForestColl does not)", minimum=0),
    ParamSpec("seed", INT, 0, "random seed choosing the arcs", minimum=0),
)
