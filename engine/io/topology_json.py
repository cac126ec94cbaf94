"""canopy-topology v1 JSON: load, save (atomically) and the bundled samples.

Numbers are parsed exactly: JSON decimals are read as :class:`decimal.Decimal`, so a
bandwidth of ``12.5`` becomes ``Fraction(25, 2)`` without passing through a binary
float. Unknown keys at the top level, on nodes and on links are kept and written back.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Generator
from decimal import Decimal
from fractions import Fraction
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, TypeVar

from canopy.engine.model.errors import CanopyError, TopologyError, unreadable, unwritable
from canopy.engine.model.limits import (
    MAX_DIGITS,
    MAX_FILE_BYTES,
    MAX_LINKS,
    MAX_NODES,
    check_decimal,
)
from canopy.engine.model.topology import Link, Node, Topology, format_number, parse_bandwidth
from canopy.engine.model.units import check_unit, from_gbps, to_gbps
from canopy.engine.model.workloads import job_to_dict, jobs_from_list

FORMAT = "canopy-topology"
VERSION = 1
DEFAULT_SAMPLE = "dgx-a100-2x8.json"

_NODE_KEYS = {"id", "kind", "label", "group", "x", "y", "failed"}
_LINK_KEYS = {"source", "target", "bandwidth", "duplex", "latency", "failed"}
_TOP_KEYS = {"format", "version", "name", "bandwidth_unit", "nodes", "links", "jobs"}
_CONTROL = re.compile("[\x00-\x1f\x7f]")
STEP_ITEMS = 64
"""Nodes or links read between two steps of :func:`reading_steps`."""

T = TypeVar("T")
Steps = Generator[None, None, T]
"""Work done a step at a time: each ``next()`` does a step, the last one raises
:class:`StopIteration` carrying the result (see :func:`finish`)."""


def finish(steps: Steps[T]) -> T:
    """Do every step of ``steps`` now and return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value


def _plain(value: Any, where: str) -> Any:
    """Turn Decimals from the exact parser back into ints/floats for unknown keys;
    numbers outside the documented range are refused with a sentence naming ``where``."""
    if isinstance(value, Decimal):
        try:
            check_decimal(value)
        except ValueError as exc:
            raise TopologyError(f"{where} has a number that {exc}.") from None
        return int(value) if value == value.to_integral_value() and "." not in str(value) \
            else float(value)
    if isinstance(value, dict):
        return {k: _plain(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, where) for v in value]
    return value


def _check_id(value: Any, what: str, source: str) -> None:
    """Node ids are non-empty strings without control characters (NUL, newline...)."""
    if isinstance(value, str) and _CONTROL.search(value):
        raise TopologyError(f"{source}: {what} {value!r} contains a control character, "
                            "which Canopy does not accept in node ids.")


def _coord(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TopologyError(f"{where} has coordinate {value!r}, which is not a number.")
    try:
        result = float(value)
    except OverflowError:       # an integer of hundreds of digits
        result = math.inf
    if not math.isfinite(result) or abs(result) > 1e12:
        raise TopologyError(f"{where} has coordinate {_shown(value)}, outside "
                            "-1e12 to 1e12.")
    return result


def _failed(raw: dict[str, Any], where: str) -> bool:
    failed = raw.get("failed", False)
    if not isinstance(failed, bool):
        raise TopologyError(f"{where} has 'failed' {_shown(failed)}; use true or false.")
    return failed


def topology_from_dict(data: Any, source: str = "topology") -> Topology:
    """Build a :class:`Topology` from parsed JSON, with errors naming ``source``."""
    return finish(_from_dict_steps(data, source))


def _from_dict_steps(data: Any, source: str) -> Steps[Topology]:
    """:func:`topology_from_dict`, a step per :data:`STEP_ITEMS` nodes or links."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: the top level is not a JSON object.")
    if data.get("format") != FORMAT:
        raise TopologyError(
            f"{source}: format is {data.get('format')!r}, expected '{FORMAT}'.")
    if data.get("version") != VERSION:
        raise TopologyError(
            f"{source}: version {_shown(data.get('version'))} is not supported "
            f"(this Canopy reads version {VERSION}).")
    if "nodes" not in data:
        raise TopologyError(f"{source} has no 'nodes' list; a topology lists its nodes "
                            "(GPUs and switches) before the links between them.")
    raw_nodes = data["nodes"]
    raw_links = data.get("links", [])
    if not isinstance(raw_nodes, list) or not isinstance(raw_links, list):
        raise TopologyError(f"{source}: 'nodes' and 'links' must be lists.")
    if len(raw_nodes) > MAX_NODES or len(raw_links) > MAX_LINKS:
        raise TopologyError(
            f"{source} has {len(raw_nodes)} nodes and {len(raw_links)} links; Canopy reads "
            f"at most {MAX_NODES} nodes and {MAX_LINKS} links.")
    try:
        unit = check_unit(data.get("bandwidth_unit") or "GB/s")
    except ValueError as exc:
        raise TopologyError(f"{source}: {exc}.") from None
    nodes = []
    for i, rn in enumerate(raw_nodes):
        if not isinstance(rn, dict) or not isinstance(rn.get("id"), str) or not rn["id"]:
            raise TopologyError(f"{source}: node {i} has no string 'id'.")
        _check_id(rn["id"], "node id", source)
        where = f"{source}: node '{rn['id']}'"
        group = rn.get("group")
        nodes.append(Node(
            id=rn["id"], kind=str(rn.get("kind", "compute")),
            label=str(rn.get("label") or ""),
            group=None if group is None else str(group),
            x=_coord(rn.get("x"), where), y=_coord(rn.get("y"), where),
            extra={k: _plain(v, where) for k, v in rn.items() if k not in _NODE_KEYS},
            failed=_failed(rn, where)))
        if i % STEP_ITEMS == STEP_ITEMS - 1:
            yield
    links = []
    for i, rl in enumerate(raw_links):
        if not isinstance(rl, dict):
            raise TopologyError(f"{source}: link {i} is not a JSON object.")
        ends = f"{rl.get('source')} - {rl.get('target')}"
        where = f"{source}: link {i} ({ends})"
        for key in ("source", "target"):
            if not isinstance(rl.get(key), str):
                raise TopologyError(f"{where} has no string '{key}'.")
            _check_id(rl[key], f"link {i}'s {key}", source)
        if rl.get("bandwidth") is None:
            raise TopologyError(f"{where} has no bandwidth; give one in {unit}, e.g. "
                                '"bandwidth": 100.')
        try:
            bandwidth = to_gbps(parse_bandwidth(rl.get("bandwidth")), unit)
        except ValueError as exc:
            raise TopologyError(
                f"{where} has bandwidth {_shown(rl.get('bandwidth'))}, which {exc}.") from None
        latency = None
        if rl.get("latency") is not None:
            try:
                latency = parse_bandwidth(rl["latency"]) if rl["latency"] != 0 else Fraction(0)
            except ValueError as exc:
                raise TopologyError(
                    f"{where} has latency {_shown(rl['latency'])}, which {exc}.") from None
        duplex = rl.get("duplex", True)
        if not isinstance(duplex, bool):
            raise TopologyError(f"{where} has 'duplex' {duplex!r}; use true or false.")
        links.append(Link(rl["source"], rl["target"], bandwidth, duplex, latency,
                          {k: _plain(v, where) for k, v in rl.items() if k not in _LINK_KEYS},
                          _failed(rl, where)))
        if i % STEP_ITEMS == STEP_ITEMS - 1:
            yield
    return Topology(
        name=str(data.get("name") or "untitled"), nodes=nodes, links=links,
        bandwidth_unit=unit,
        extra={k: _plain(v, source) for k, v in data.items() if k not in _TOP_KEYS},
        jobs=jobs_from_list(data["jobs"], source) if "jobs" in data else [])


def _shown(value: Any) -> str:
    """A number from the file as it was written, shortened when very long."""
    text = str(value) if isinstance(value, Decimal) else repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…{text[-8:]} ({len(text)} characters)"


def topology_to_dict(topo: Topology) -> dict[str, Any]:
    """The canopy-topology v1 JSON object for ``topo`` (unknown keys included)."""
    nodes = []
    for n in topo.nodes:
        d: dict[str, Any] = {"id": n.id, "kind": n.kind, "label": n.label or n.id,
                             "group": n.group}
        if n.x is not None and n.y is not None:
            d["x"], d["y"] = round(n.x, 3), round(n.y, 3)
        if n.failed:
            d["failed"] = True
        d.update(n.extra)
        nodes.append(d)
    links = []
    for link in topo.links:
        d = {"source": link.source, "target": link.target,
             "bandwidth": format_number(from_gbps(link.bandwidth, topo.bandwidth_unit)),
             "duplex": link.duplex}
        if link.latency is not None:
            d["latency"] = format_number(link.latency)
        if link.failed:
            d["failed"] = True
        d.update(link.extra)
        links.append(d)
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": topo.name,
                           "bandwidth_unit": topo.bandwidth_unit}
    out.update(topo.extra)
    out["nodes"] = nodes
    out["links"] = links
    if topo.jobs:
        out["jobs"] = [job_to_dict(job) for job in topo.jobs]
    return out


def loads_topology(text: str, source: str = "topology") -> Topology:
    """Parse canopy-topology JSON text.

    Parameters
    ----------
    text : str
        The JSON document.
    source : str, optional
        Names the text (a file name) in error messages.

    Returns
    -------
    Topology
        Bandwidths are exact fractions of the decimal text, never binary floats.

    Raises
    ------
    TopologyError
        One sentence naming ``source`` and the node, link or field at fault.

    Examples
    --------
    >>> topo = loads_topology('''{"format": "canopy-topology", "version": 1,
    ...   "nodes": [{"id": "a", "kind": "compute"}, {"id": "b", "kind": "compute"}],
    ...   "links": [{"source": "a", "target": "b", "bandwidth": 0.1}]}''')
    >>> topo.links[0].bandwidth
    Fraction(1, 10)
    """
    return finish(_loads_steps(text, source))


def _loads_steps(text: str, source: str) -> Steps[Topology]:
    """:func:`loads_topology` a step at a time (the JSON parse is the first step)."""
    if len(text) > MAX_FILE_BYTES:
        raise TopologyError(f"{source} is {_mib(len(text))}; Canopy reads topology files of "
                            f"at most {_mib(MAX_FILE_BYTES)}.")
    try:
        data = json.loads(text, parse_float=Decimal, parse_int=_integer,
                          parse_constant=_reject_constant)
        return (yield from _from_dict_steps(data, source))
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{source} is not valid JSON (line {exc.lineno}, "
                            f"column {exc.colno}: {exc.msg}).") from None
    except RecursionError:
        raise TopologyError(f"{source} nests arrays or objects too deeply for Canopy to "
                            "read (a topology needs three levels).") from None
    except ValueError as exc:
        raise TopologyError(f"{source}: {exc}.") from None


def _integer(text: str) -> int | Decimal:
    """JSON integers: Python ints up to the digit limit; longer ones stay Decimal so that
    the bandwidth parser (or :func:`_plain`) refuses them with a sentence."""
    return int(text) if len(text) <= MAX_DIGITS else Decimal(text)


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON numbers")


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read a canopy-topology v1 file.

    Parameters
    ----------
    path : str or os.PathLike
        A canopy-topology JSON file (docs/formats.md).

    Returns
    -------
    Topology
        Nodes and links with exact :class:`fractions.Fraction` bandwidths in GB/s.

    Raises
    ------
    TopologyError
        One sentence naming the file and the node, link or field at fault.

    Examples
    --------
    >>> from canopy.engine import load_topology
    >>> load_topology("no-such-file.json")
    Traceback (most recent call last):
    ...
    canopy.engine.model.errors.TopologyError: no-such-file.json: no such file.
    """
    return finish(reading_steps(path))


def reading_steps(path: str | os.PathLike[str]) -> Steps[Topology]:
    """:func:`load_topology` a step at a time, so a caller with an event loop can read a
    large file a slice per turn: the file is read and parsed as JSON in the first step, then
    each step builds :data:`STEP_ITEMS` nodes or links (a 1,024-GPU cluster has 2,178 nodes
    and 3,072 links). Errors are the same sentences, raised from a step.

    Examples
    --------
    >>> steps = reading_steps("no-such-file.json")  # nothing is read before the first step
    >>> finish(steps)
    Traceback (most recent call last):
    ...
    canopy.engine.model.errors.TopologyError: no-such-file.json: no such file.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TopologyError(f"{p} is {_mib(size)}; Canopy reads topology files of at most "
                                f"{_mib(MAX_FILE_BYTES)}.")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"{p}: no such file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(unreadable(p, exc)) from None
    return (yield from _loads_steps(text, str(p)))


def dumps_topology(topo: Topology) -> str:
    return json.dumps(topology_to_dict(topo), indent=1, ensure_ascii=False) + "\n"


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write to a temporary file beside ``path``, fsync it, then rename it over ``path``
    (a device or pipe such as ``/dev/null`` is written through instead).

    The new file keeps the permissions of the file it replaces (or the umask's default
    for a new file), not mkstemp's private 0600.
    """
    p = Path(path)
    if p.exists() and not p.is_file():
        # A device or pipe (/dev/null, /dev/stdout, a FIFO): write through, never replace it.
        with open(p, "wb") as fh:
            fh.write(data)
        return
    try:
        mode = p.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    import tempfile  # here: it loads random and hashing, which start-up need not pay

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", suffix=".tmp",
                                   dir=p.parent or ".")
    except OSError as exc:
        raise CanopyError(unwritable(p, exc)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    remove_orphaned_temporaries(p)


def remove_orphaned_temporaries(path: str | os.PathLike[str]) -> int:
    """Delete the temporary files that writers of ``path`` killed mid-write left beside it
    (``.NAME.PID.xxxx.tmp``, :func:`atomic_write_bytes`' names); how many went.

    A file goes when its writer is gone: no process has its id, or the process that has
    it now started after the file was last written (the id was reused). A live writer's
    file (another editor saving the same file at this moment) is kept, as is every file
    that cannot be told apart (an id this process may not signal, on a system without
    process start times). Saves call this after they rename, editors when they open.
    """
    p = Path(path)
    removed = 0
    try:
        candidates = list(p.parent.glob(f".{glob_escape(p.name)}.*.tmp"))
    except OSError:
        return 0
    for tmp in candidates:
        pid = tmp.name[len(p.name) + 2:].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            written = tmp.stat().st_mtime
        except OSError:
            continue
        if _writer_gone(int(pid), written):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed += 1
    return removed


def _writer_gone(pid: int, written: float) -> bool:
    """Whether process ``pid``, which wrote a file last modified at ``written`` (epoch
    seconds), has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass                          # alive, someone else's: its start time may tell
    started = _process_start(pid)
    return started is not None and started > written + 1.0


def _process_start(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), where ``/proc`` tells; else None."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        pass
    return None


def save_topology(topo: Topology, path: str | os.PathLike[str]) -> None:
    """Save a topology as canopy-topology JSON, atomically.

    The text goes to a temporary file in the same folder that then replaces ``path``, so
    a crash mid-save never leaves a half-written file; the old file's permissions stay.

    Parameters
    ----------
    topo : Topology
        What to save; unknown keys read from the original file are written back.
    path : str or os.PathLike
        Where to save it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "copy.json"
    >>> save_topology(load_sample("forestcoll-fig2.json"), target)
    >>> load_topology(target).name == load_sample("forestcoll-fig2.json").name
    True
    """
    atomic_write_text(path, dumps_topology(topo))


def sample_names() -> list[str]:
    """File names of the bundled samples, sorted.

    Parameters
    ----------
    None

    Returns
    -------
    list of str
        Names that :func:`load_sample` accepts.

    Examples
    --------
    >>> "dgx-a100-2x8.json" in sample_names()
    True
    """
    from importlib import resources  # here: loading it costs every command's start-up

    return sorted(f.name for f in resources.files("canopy.samples").iterdir()
                  if f.name.endswith(".json"))


def load_sample(name: str = DEFAULT_SAMPLE) -> Topology:
    """Load a bundled sample through importlib.resources (works from wheels too).

    Parameters
    ----------
    name : str, optional
        A name from :func:`sample_names`, with or without ``.json``; by default the
        editor's default topology (2 x DGX A100).

    Returns
    -------
    Topology

    Raises
    ------
    TopologyError
        When there is no such sample.

    Examples
    --------
    >>> len(load_sample("dgx-a100-2x8").compute_nodes())
    16
    """
    if not name.endswith(".json"):
        name += ".json"
    from importlib import resources

    ref = resources.files("canopy.samples").joinpath(name)
    if not ref.is_file():
        raise TopologyError(f"there is no bundled sample named '{name}'.")
    return loads_topology(ref.read_text(encoding="utf-8"), f"sample {name}")
