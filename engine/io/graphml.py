"""GraphML import and export (through networkx), keeping kinds, exact bandwidths, groups,
coordinates, latencies, failed marks, jobs and unknown keys (scalars as they are, lists and
objects such as an imported link's ``ports`` as JSON text).

Export writes a directed multigraph: one GraphML edge per canopy link, with ``bandwidth``
as exact text ("12.5", "1/3"), ``duplex`` as a boolean, ``link_index`` (the link order)
and the nodes' ``kind``, ``label``, ``group``, ``x`` and ``y``; ``failed`` on failed
nodes and links; the jobs as canopy JSON text in the graph's ``jobs``. GraphML values are
scalars, so an unknown key holding a list or an object (on the graph, a node or a link) is
written as JSON text, and the graph's ``canopy_json_keys`` names those keys per level
(``{"graph": [...], "node": [...], "link": [...]}``). Import reads these back
and also accepts GraphML from other tools: nodes without ``kind`` are compute nodes,
``capacity`` stands in for a missing ``bandwidth``, and an undirected graph's edges are
duplex links.

Untrusted files are parsed by canopy.engine.io.safe_xml (no entities, no DTD, no network, size
limit); networkx only ever sees the re-serialised, entity-free element tree.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import networkx as nx
from lxml import etree

from canopy.engine.io.safe_xml import parse_xml_bytes, parse_xml_file
from canopy.engine.io.topology_json import (
    FORMAT,
    VERSION,
    _integer,
    _reject_constant,
    atomic_write_bytes,
    topology_from_dict,
)
from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import Topology, format_number
from canopy.engine.model.units import from_gbps
from canopy.engine.model.workloads import job_to_dict

_SCALARS = (str, int, float, bool)
_NODE_KEYS = ("kind", "label", "group", "x", "y")
_LINK_KEYS = ("bandwidth", "duplex", "latency")
_ORDER = "link_index"      # canopy's link order, which networkx does not keep
_JSON_KEYS = "canopy_json_keys"   # per level, the unknown keys written as JSON text
_LEVELS = ("graph", "node", "link")


def _json_keys(extras: list[dict[str, Any]]) -> set[str]:
    """Keys holding a list or an object in any of ``extras`` (every value of such a key
    is written as JSON text, so that reading it back needs no guessing)."""
    return {k for extra in extras for k, v in extra.items() if isinstance(v, (list, dict))}


def _exported(extra: dict[str, Any], as_json: set[str], taken: dict[str, Any]
              ) -> dict[str, Any]:
    """The unknown keys of ``extra`` as GraphML values: scalars as they are, the keys in
    ``as_json`` as JSON text; keys already in ``taken`` and other values are left out."""
    out: dict[str, Any] = {}
    for k, v in extra.items():
        if k in taken:
            continue
        if k in as_json:
            out[k] = json.dumps(v, ensure_ascii=False)
        elif isinstance(v, _SCALARS):
            out[k] = v
    return out


def topology_to_graph(topo: Topology) -> nx.MultiDiGraph:
    """The topology as a networkx MultiDiGraph with canopy's attributes."""
    g = nx.MultiDiGraph(name=topo.name, bandwidth_unit=topo.bandwidth_unit)
    as_json = {"graph": _json_keys([topo.extra]),
               "node": _json_keys([n.extra for n in topo.nodes]),
               "link": _json_keys([link.extra for link in topo.links])}
    g.graph.update(_exported(topo.extra, as_json["graph"], g.graph))
    if any(as_json.values()):
        g.graph[_JSON_KEYS] = json.dumps({level: sorted(keys) for level, keys in
                                          as_json.items() if keys})
    if topo.jobs:
        g.graph["jobs"] = json.dumps([job_to_dict(job) for job in topo.jobs])
    for n in topo.nodes:
        attrs: dict[str, Any] = {"kind": n.kind, "label": n.label or n.id}
        if n.group is not None:
            attrs["group"] = n.group
        if n.x is not None and n.y is not None:
            attrs["x"], attrs["y"] = float(n.x), float(n.y)
        if n.failed:
            attrs["failed"] = True
        attrs.update(_exported(n.extra, as_json["node"], attrs))
        g.add_node(n.id, **attrs)
    for index, link in enumerate(topo.links):
        attrs = {"bandwidth": str(format_number(from_gbps(link.bandwidth, topo.bandwidth_unit))),
                 "duplex": link.duplex, _ORDER: index}
        if link.latency is not None:
            attrs["latency"] = str(format_number(link.latency))
        if link.failed:
            attrs["failed"] = True
        attrs.update(_exported(link.extra, as_json["link"], attrs))
        g.add_edge(link.source, link.target, **attrs)
    return g


def dumps_graphml(topo: Topology) -> bytes:
    buffer = io.BytesIO()
    nx.write_graphml_xml(topology_to_graph(topo), buffer, encoding="utf-8")
    return buffer.getvalue()


def save_graphml(topo: Topology, path: str | os.PathLike[str]) -> None:
    """Write GraphML atomically."""
    atomic_write_bytes(path, dumps_graphml(topo))


def _graph_from_tree(root: etree._Element, source: str) -> nx.Graph:
    if any(True for _ in root.iter(etree.Entity)):
        raise TopologyError(f"{source} refers to XML entities, which Canopy does not accept.")
    seen: set[str] = set()
    for node in root.iter("{*}node"):
        node_id = node.get("id")
        if node_id in seen:
            raise TopologyError(f"{source}, line {node.sourceline}: node id '{node_id}' is "
                                "used more than once.")
        seen.add(node_id or "")
    text = etree.tostring(root, encoding="unicode")
    try:
        with warnings.catch_warnings():      # networkx warns (on stderr) of keys with no type
            warnings.simplefilter("ignore")
            return nx.parse_graphml(text)
    except (nx.NetworkXError, ElementTree.ParseError, KeyError, ValueError,
            TypeError) as exc:
        raise TopologyError(f"{source} is not GraphML that Canopy can read "
                            f"({str(exc).rstrip('.') or exc.__class__.__name__}).") from None


def graph_to_topology(g: nx.Graph, source: str) -> Topology:
    """Map a networkx graph with canopy (or similar) attributes to a Topology."""
    graph = dict(g.graph)
    as_json = _read_json_keys(graph.pop(_JSON_KEYS, None), source)
    nodes = []
    for node_id, data in g.nodes(data=True):
        node = {"id": str(node_id), "kind": data.get("kind", "compute"),
                "label": data.get("label", str(node_id)), "group": data.get("group")}
        for axis in ("x", "y"):
            if data.get(axis) is not None:
                node[axis] = _coordinate(data[axis], source, node_id)
        node.update(_decoded({k: v for k, v in data.items() if k not in _NODE_KEYS},
                             as_json["node"], source, f"node '{node_id}'"))
        nodes.append(node)
    links = []
    edges = list(g.edges(data=True))
    if all(isinstance(data.get(_ORDER), int) for _, _, data in edges):
        edges.sort(key=lambda edge: edge[2][_ORDER])
    for u, v, data in edges:
        bandwidth = data.get("bandwidth", data.get("capacity"))
        if bandwidth is None:
            raise TopologyError(f"{source}: the edge {u} - {v} has no 'bandwidth'.")
        duplex = data.get("duplex", True) if g.is_directed() else True
        link = {"source": str(u), "target": str(v), "bandwidth": str(bandwidth),
                "duplex": duplex}
        if data.get("latency") is not None:
            link["latency"] = str(data["latency"])
        link.update(_decoded({k: v for k, v in data.items()
                              if k not in (*_LINK_KEYS, _ORDER, "capacity", "id")},
                             as_json["link"], source, f"the edge {u} - {v}"))
        links.append(link)
    graph = _decoded(graph, as_json["graph"] - {"jobs"}, source, "the graph")
    name = graph.pop("name", None) or Path(source).stem
    unit = graph.pop("bandwidth_unit", "GB/s")
    for key in ("node_default", "edge_default"):
        graph.pop(key, None)
    jobs = graph.pop("jobs", None)
    data = {"format": FORMAT, "version": VERSION, "name": name, "bandwidth_unit": unit,
            **{k: v for k, v in graph.items()
               if isinstance(v, _SCALARS) or k in as_json["graph"]},
            "nodes": nodes, "links": links}
    if isinstance(jobs, str):
        try:
            data["jobs"] = json.loads(jobs, parse_float=Decimal, parse_int=_integer,
                                      parse_constant=_reject_constant)
        except (json.JSONDecodeError, RecursionError, ValueError):
            raise TopologyError(f"{source}: the graph's 'jobs' is not JSON that Canopy "
                                "reads.") from None
    return topology_from_dict(data, source)


def _read_json_keys(value: Any, source: str) -> dict[str, set[str]]:
    """The graph's ``canopy_json_keys``: per level, the keys whose values are JSON text."""
    out: dict[str, set[str]] = {level: set() for level in _LEVELS}
    if value is None:
        return out
    try:
        data = json.loads(str(value))
    except (json.JSONDecodeError, RecursionError, ValueError):
        data = None
    if not isinstance(data, dict) or not all(
            level in _LEVELS and isinstance(keys, list) and all(isinstance(k, str) for k in keys)
            for level, keys in data.items()):
        raise TopologyError(f"{source}: the graph's '{_JSON_KEYS}' is not an object of "
                            "key lists per level (graph, node, link).")
    for level, keys in data.items():
        out[level] = set(keys)
    return out


def _decoded(data: dict[str, Any], as_json: set[str], source: str, what: str
             ) -> dict[str, Any]:
    """``data`` with the values of the keys in ``as_json`` read back from JSON text."""
    out = dict(data)
    for key in as_json & out.keys():
        try:
            out[key] = json.loads(str(out[key]), parse_float=Decimal, parse_int=_integer,
                                  parse_constant=_reject_constant)
        except (json.JSONDecodeError, RecursionError, ValueError):
            raise TopologyError(f"{source}: the value of '{key}' on {what} is not the JSON "
                                "text the graph's canopy_json_keys says it is.") from None
    return out


def _coordinate(value: Any, source: str, node_id: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TopologyError(f"{source}: node '{node_id}' has coordinate {value!r}, "
                            "which is not a number.") from None


def loads_graphml(data: bytes, source: str = "GraphML") -> Topology:
    """Parse GraphML bytes safely and build a Topology."""
    return graph_to_topology(_graph_from_tree(parse_xml_bytes(data, source), source), source)


def load_graphml(path: str | os.PathLike[str]) -> Topology:
    """Read a GraphML file safely (canopy.engine.io.safe_xml limits) and build a Topology."""
    source = str(path)
    return graph_to_topology(_graph_from_tree(parse_xml_file(path), source), source)
