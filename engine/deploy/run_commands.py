"""The environment and ``nccl-tests`` command line that run an exported schedule.

One paste on the cluster validates an export on hardware: ``mpirun`` starts one rank
per GPU, exports the variables that make the runtime load the file, and runs the
nccl-tests binary of the collective from 1 MB to 1 GB, doubling (``-b 1M -e 1G -f 2``,
one GPU per rank, ``-g 1``).

* **NCCL graph file** (plain NCCL): ``NCCL_GRAPH_FILE`` names the file, and
  ``NCCL_ALGO=Ring`` keeps NCCL on the rings it describes.
* **MSCCL** (the MSCCL fork of NCCL): ``MSCCL_XML_FILES`` names the XML and
  ``NCCL_ALGO=MSCCL,RING,TREE`` lets MSCCL take the sizes the XML covers.
* **RCCL**: MSCCL algorithms are read from the folder ``MSCCL_ALGO_DIR``;
  ``RCCL_MSCCL_FORCE_ENABLE=1`` turns MSCCL on where it is not on by default
  (anything but MI300X). RCCL reads *every* file of that folder as an algorithm, and one
  that is not fails the communicator's set-up, so the folder must hold the exported XMLs
  alone (:func:`algo_dir_note`).

Examples
--------
>>> print(run_command("nccl-graph", "/data/graph.xml", "allgather", 16, 8))
mpirun -np 16 -N 8 \\
  -x NCCL_GRAPH_FILE=/data/graph.xml \\
  -x NCCL_ALGO=Ring \\
  ./build/all_gather_perf -b 1M -e 1G -f 2 -g 1
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from canopy.engine.model.errors import CanopyError

TEST_BINARIES = {"allgather": "all_gather_perf", "reduce-scatter": "reduce_scatter_perf",
                 "allreduce": "all_reduce_perf", "alltoall": "alltoall_perf"}
RUNTIMES = ("nccl-graph", "msccl", "rccl")


def run_environment(runtime: str, path: str, config: str | None = None) -> dict[str, str]:
    """The variables that make ``runtime`` load the exported file at ``path`` (with
    ``config``, an MSCCL config naming an XML per size range, :mod:`canopy.engine.msccl.
    ranges`: MSCCL reads it as ``MSCCL_CONFIG``, RCCL the XMLs' folder)."""
    if runtime == "nccl-graph":
        return {"NCCL_GRAPH_FILE": path, "NCCL_ALGO": "Ring"}
    if runtime == "msccl" and config is not None:
        return {"MSCCL_CONFIG": config, "NCCL_ALGO": "MSCCL,RING,TREE"}
    if runtime == "msccl":
        return {"MSCCL_XML_FILES": path, "NCCL_ALGO": "MSCCL,RING,TREE"}
    if runtime == "rccl":
        return {"RCCL_MSCCL_FORCE_ENABLE": "1", "MSCCL_ALGO_DIR": os.path.dirname(path) or "."}
    raise CanopyError(f"unknown runtime '{runtime}'; use one of {', '.join(RUNTIMES)}.")


RCCL_NOTE = ("RCCL 2.28.3 (ROCm 7.13) and later load no MSCCL XML (RCCL removed its MSCCL "
             "integration; mscclLoadAlgo and mscclRunAlgo are no-ops there): on a current "
             "ROCm run the schedule as an MSCCL++ plan (canopy solve --mscclpp, or File > "
             "Export > MSCCL++ Plan)")


def algo_dir_note(written: Sequence[str]) -> str | None:
    """The sentence that says what else the folder of the ``written`` XMLs holds, which
    RCCL would also load from ``MSCCL_ALGO_DIR`` (its scheduler reads every regular file
    and link there as an MSCCL algorithm and stops at the first that is not one; another
    algorithm for the same collective would compete with the export); None where the
    folder holds the export alone."""
    folder = os.path.dirname(os.path.abspath(written[0]))
    mine = {os.path.abspath(path) for path in written}
    others = sorted(entry.name for entry in os.scandir(folder)
                    if entry.path not in mine
                    and (entry.is_symlink() or entry.is_file(follow_symlinks=False)))
    if not others:
        return None
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    return (f"RCCL loads every file in MSCCL_ALGO_DIR ({folder}) as an MSCCL algorithm, and "
            f"that folder also holds {shown}: move the exported XMLs to a folder of their "
            "own before running.")


def run_command(runtime: str, path: str | os.PathLike[str], collective: str, ranks: int,
                ranks_per_server: int, config: str | None = None) -> str:
    """The shell command that runs nccl-tests on the exported file.

    Parameters
    ----------
    runtime : {"nccl-graph", "msccl", "rccl"}
        What loads the file.
    path : str or os.PathLike
        Where the file will be on the cluster (made absolute here).
    collective : str
        The collective the file implements.
    ranks, ranks_per_server : int
        GPUs in all and per server.
    config : str, optional
        The MSCCL config naming an XML per size range, where the export wrote one (made
        absolute; ``path`` is then one of its XMLs).

    Returns
    -------
    str
        ``mpirun`` with one ``-x NAME=value`` line per variable and the nccl-tests binary.
    """
    binary = TEST_BINARIES.get(collective)
    if binary is None:
        raise CanopyError(f"nccl-tests has no test for '{collective}'.")
    text = str(path)
    where = text if text.startswith("/") else os.path.abspath(text)
    lines = [f"mpirun -np {ranks} -N {ranks_per_server}"]
    lines += [f"  -x {name}={shlex.quote(value)}"
              for name, value in run_environment(
                  runtime, where, None if config is None else os.path.abspath(config)).items()]
    lines.append(f"  ./build/{binary} -b 1M -e 1G -f 2 -g 1")
    return " \\\n".join(lines)
