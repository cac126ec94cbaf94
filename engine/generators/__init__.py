"""Parametric topology generators and their registry.

``GENERATORS`` maps a kind (``cluster``, ``torus``, ...) to a :class:`Generator`: its
title, summary, building function and :class:`ParamSpec` list. ``canopy generate`` and
the GUI's generator dialog are both built from it::

    >>> from canopy.engine.generators import generate
    >>> topo = generate("ring", {"n": "4", "bandwidth": "50"})
    >>> len(topo.compute_nodes()), topo.extra["generator"]["params"]["n"]
    (4, '4')

Every generated topology records its recipe under the top-level key ``generator``
(kept in canopy-topology JSON), so it can be regenerated or reopened in the dialog.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from canopy.engine.generators import cluster, direct, multidim, punctured
from canopy.engine.generators.gpu_models import GPU_MODELS, NONE
from canopy.engine.generators.params import BANDWIDTH, BANDWIDTHS, ParameterError, ParamSpec
from canopy.engine.model.topology import Topology
from canopy.engine.model.units import GBPS, check_unit, from_gbps, to_gbps

__all__ = ["GENERATORS", "Generator", "ParamSpec", "ParameterError", "generate"]


@dataclass(frozen=True)
class Generator:
    """One kind of generated topology."""

    kind: str
    title: str
    summary: str
    build: Callable[..., Topology]
    params: tuple[ParamSpec, ...]

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def resolve(self, values: Mapping[str, Any], unit: str = GBPS) -> dict[str, Any]:
        """Defaults overlaid with a GPU model's values (``gpu``, when given) and then with
        ``values`` (text or typed), each parsed and checked; bandwidths in ``unit``."""
        names = {p.name for p in self.params}
        for name in values:
            if name not in names:
                flags = ", ".join(p.flag for p in self.params)
                raise ParameterError(f"'{self.kind}' has no parameter '{name}'; "
                                     f"its parameters are {flags}.")
        resolved = self.defaults()
        for p in self.params:         # defaults are stated in GB/s
            if p.type == BANDWIDTH:
                resolved[p.name] = from_gbps(resolved[p.name], unit)
            elif p.type == BANDWIDTHS:
                resolved[p.name] = tuple(from_gbps(v, unit) for v in resolved[p.name])
        if "gpu" in names and "gpu" in values:
            model = GPU_MODELS.get(self.param("gpu").parse(values["gpu"]))
            if model is not None:
                for name, value in model.generator_values().items():
                    spec = self.param(name)
                    resolved[name] = spec.parse(from_gbps(value, unit)
                                                if spec.type == BANDWIDTH else value, unit)
        for p in self.params:
            if p.name in values:
                resolved[p.name] = p.parse(values[p.name], unit)
        return resolved


GENERATORS: dict[str, Generator] = {g.kind: g for g in (
    Generator("cluster", "Multi-server GPU cluster",
              "servers x GPUs with an NVSwitch, mesh or ring inside each server, NICs, and a "
              "single-switch, rail-optimised or leaf-spine network between servers",
              cluster.cluster, cluster.CLUSTER_PARAMS),
    Generator("torus", "Torus", "a torus of any dimension (e.g. TPU-v4-like 4x4x4)",
              direct.torus, direct.TORUS_PARAMS),
    Generator("punctured-torus", "Punctured torus",
              "a torus with k random links removed (seeded), as in failure studies",
              punctured.punctured_torus, punctured.PUNCTURED_TORUS_PARAMS),
    Generator("mesh", "Mesh", "a mesh of any dimension (a torus without wrap-around links)",
              direct.mesh, direct.MESH_PARAMS),
    Generator("ring", "Ring", "N compute nodes in a ring, bidirectional or one-way",
              direct.ring, direct.RING_PARAMS),
    Generator("fully-connected", "Fully connected", "every pair of N compute nodes linked",
              direct.fully_connected, direct.FULLY_CONNECTED_PARAMS),
    Generator("hypercube", "Hypercube", "2^d compute nodes, linked when labels differ in one bit",
              direct.hypercube, direct.HYPERCUBE_PARAMS),
    Generator("dragonfly", "Dragonfly",
              "fully connected groups of routers joined by global links (Kim et al. 2008)",
              direct.dragonfly, direct.DRAGONFLY_PARAMS),
    Generator("kautz", "Generalised Kautz", "the d-regular digraph GK(d, n) with one-way links",
              direct.kautz, direct.KAUTZ_PARAMS),
    Generator("punctured-kautz", "Punctured generalised Kautz",
              "GK(d, n) with k random one-way links removed (seeded), as in failure studies",
              punctured.punctured_kautz, punctured.PUNCTURED_KAUTZ_PARAMS),
    Generator("multi-dim", "Multi-dimensional (ASTRA-sim style)",
              "a grid whose dimensions are each a ring, a fully connected clique or a switch "
              "(TACOS's 3D-RFS is 2x4x8 ring,fc,switch)",
              multidim.multi_dim, multidim.MULTI_DIM_PARAMS),
)}


def generate(kind: str, values: Mapping[str, Any] | None = None,
             unit: str = GBPS) -> Topology:
    """Build a topology of ``kind`` from parameter ``values`` (missing ones take defaults).

    Parameters
    ----------
    kind : str
        A key of :data:`GENERATORS` (``canopy generate --list`` describes each).
    values : mapping, optional
        Parameter values, as numbers or as the text a user typed.
    unit : {"GB/s", "GiB/s", "Gb/s", "Gib/s"}, optional
        The unit of the bandwidth parameters; the topology keeps it as its
        ``bandwidth_unit`` (:mod:`canopy.engine.model.units`).

    Returns
    -------
    Topology
        The network, with ``extra["generator"]`` recording how it was made.

    Raises
    ------
    ParameterError
        One sentence naming the parameter, for unknown kinds or parameters and unusable
        values.

    Examples
    --------
    >>> from canopy.engine import generate
    >>> len(generate("ring", {"n": 4}).compute_nodes())
    4
    """
    gen = GENERATORS.get(kind)
    if gen is None:
        raise ParameterError(f"there is no generator '{kind}'; choose one of "
                             f"{', '.join(GENERATORS)}.")
    try:
        check_unit(unit)
    except ValueError as exc:
        raise ParameterError(f"{exc}.") from None
    resolved = gen.resolve(values or {}, unit)
    topo = gen.build(**resolved)
    for link in topo.links:
        link.bandwidth = to_gbps(link.bandwidth, unit)
    topo.bandwidth_unit = unit
    if unit != GBPS:          # the builders name bandwidths in the numbers they were given
        topo.name = topo.name.replace(" GB/s", f" {unit}")
    topo.extra["generator"] = {"kind": kind,
                               "params": {p.name: p.format(resolved[p.name])
                                          for p in gen.params
                                          if not (p.name == "gpu" and resolved[p.name] == NONE)}}
    if unit != GBPS:
        topo.extra["generator"]["unit"] = unit
    model = GPU_MODELS.get(resolved.get("gpu", ""))
    if model is not None:
        topo.extra["gpu"] = model.record()
    return topo
