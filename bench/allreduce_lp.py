"""Does ForestColl's allreduce LP (App. E) beat reduce-scatter + allgather? Per sample.

Usage: python -m bench.allreduce_lp [--time-limit S] [--samples a,b] [--no-free] [--generators]
Prints JSON, one object per sample (and, with --generators, per generator family at its
default parameters):
- ``rs_ag_algbw``: exact algbw of reduce-scatter + allgather (§4.6), a lower bound;
- ``cut_bound``: exact min B+(S) over cuts splitting the compute nodes, an upper bound;
- LP (6) with equal rates as written with flow variables (``lp_flows_equal_*``) and by
  cut generation (``lp_cuts_equal_*``, :mod:`canopy.engine.allreduce.lp_cuts`), and with free
  rates by cut generation (``lp_cuts_free_*``): value (HiGHS, feasibility tolerance 1e-9),
  rows, CPU seconds, or the error (a time limit reached);
- ``formulation_used`` (what ``canopy solve`` would use), ``gain_percent`` over RS + AG;
- where it beats RS + AG, the schedule built from it
  (:func:`canopy.engine.allreduce.lp_schedule.lp_schedule`): exact verified algbw, k, trees,
  CPU seconds, and the simulated algbw at 1 GiB (:func:`canopy.engine.execution.simulate.fastest`,
  the compare default) with its share of the bound and the pipeline depth, beside RS + AG's.
CPU seconds are time.process_time().
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from canopy.engine.allreduce.lp import AllreduceLP, cut_bound, lp_size, solve_allreduce_lp
from canopy.engine.allreduce.lp_cuts import solve_allreduce_cuts
from canopy.engine.allreduce.lp_schedule import FLOWS_MAX_VARIABLES, lp_schedule
from canopy.engine.execution.simulate import fastest
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import GENERATORS, generate
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.collectives import collective_algbw
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.plan import schedule_plan
from canopy.engine.model.topology import Topology
from canopy.engine.network.indexed import Network

GIB = 1 << 30


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.process_time()
    return fn(), round(time.process_time() - start, 3)


def _lp(out: dict[str, Any], key: str, solver: Any) -> AllreduceLP | None:
    """Solve one LP variant into ``out[key_*]``; None (with the error) if it fails."""
    try:
        lp, out[f"cpu_s_{key}"] = _timed(solver)
    except CanopyError as exc:
        out[f"{key}_error"] = str(exc)
        return None
    out[f"{key}_algbw"] = round(lp.value, 4)
    out[f"{key}_rows"] = lp.constraints
    return lp


def row(name: str, topo: Topology, time_limit: float, free: bool) -> dict[str, Any]:
    net = Network.from_topology(topo)
    rs_ag = collective_algbw("allreduce", len(net.compute), find_optimum(net).x)
    out: dict[str, Any] = {"sample": name, "gpus": len(net.compute),
                           "rs_ag_algbw": round(float(rs_ag), 4),
                           "cut_bound": round(float(cut_bound(net)), 4),
                           "lp_variables_flows": lp_size(net),
                           "lp_variables_cuts": len(net.compute) + 2 * len(net.capacity),
                           "feasibility_tolerance": 1e-9, "time_limit_s": time_limit}
    flows = _lp(out, "lp_flows_equal", lambda: solve_allreduce_lp(
        net, equal_rates=True, time_limit=time_limit))
    cuts = _lp(out, "lp_cuts_equal", lambda: solve_allreduce_cuts(
        net, equal_rates=True, time_limit=time_limit))
    if free:
        _lp(out, "lp_cuts_free", lambda: solve_allreduce_cuts(net, time_limit=time_limit))
    lp = flows if lp_size(net) <= FLOWS_MAX_VARIABLES else cuts
    if lp is None:
        return out
    out["formulation_used"] = lp.formulation
    out["beats_rs_ag"] = lp.beats_rs_ag
    out["gain_percent"] = round(lp.gain * 100, 3)
    if not lp.beats_rs_ag:
        return out
    schedule, out["cpu_s_schedule"] = _timed(lambda: lp_schedule(topo, lp))
    out.update(schedule_algbw_exact=str(schedule.algbw), k=schedule.k,
               trees=len(schedule.trees) + len(schedule.reduce_trees or []))
    sim, out["cpu_s_simulate"] = _timed(lambda: fastest(topo, schedule_plan(schedule), GIB))
    out.update(sim_algbw_1g=round(float(sim.algbw), 3),
               sim_share_of_bound_1g=round(float(sim.algbw / schedule.algbw), 4),
               sim_pieces_1g=sim.pieces)
    rs = solve(topo, "allreduce")
    rs_sim = fastest(topo, schedule_plan(rs), GIB)
    out.update(rs_ag_sim_algbw_1g=round(float(rs_sim.algbw), 3),
               rs_ag_sim_pieces_1g=rs_sim.pieces)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-limit", type=float, default=300.0,
                        help="seconds (wall) HiGHS may spend on one LP (default 300)")
    parser.add_argument("--samples", help="comma-separated sample names (default: all)")
    parser.add_argument("--no-free", action="store_true",
                        help="skip the LP with free rates (cut generation)")
    parser.add_argument("--generators", action="store_true",
                        help="also every generator family at its default parameters")
    args = parser.parse_args()
    names = sample_names() if args.samples is None else [
        n for n in args.samples.split(",") if n]
    cases = [(name, load_sample(name)) for name in names]
    if args.generators:
        cases += [(f"generate {kind}", generate(kind)) for kind in GENERATORS]
    rows = [row(name, topo, args.time_limit, not args.no_free) for name, topo in cases]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
