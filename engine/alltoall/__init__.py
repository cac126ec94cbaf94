"""All-to-all as a maximum concurrent multi-commodity flow (Basu et al., "Efficient
All-to-All Collective Communication Schedules for Direct-Connect Topologies",
arXiv:2309.13541).

Every ordered pair of compute nodes sends λ at once; λ* is found exactly by the link LP
(:mod:`.lp`) or, on large networks, by per-source trees under multiplicative lengths
(:mod:`.decomposition`), turned into verified routes (:mod:`.schedule`, :mod:`.paths`) and
certified by exact upper bounds (:mod:`.bound`); :mod:`.exact` recovers the exact flows on
the LP's support, :mod:`.msccl` lowers them to MSCCL XML, :mod:`.compare` runs them against
direct and ring all-to-all, :mod:`.timestep_lp` solves the time-stepped (store-and-forward)
LP and :mod:`.timesteps` reads steps off a route schedule; :mod:`.nic` models the
host-to-NIC bottleneck.
"""

from canopy.engine.alltoall.problem import FORWARDING, AllToAllProblem, build_problem
from canopy.engine.alltoall.schedule import AllToAllSchedule, Route, verify
from canopy.engine.alltoall.solve import METHODS, AllToAllResult, solve_alltoall

__all__ = ["FORWARDING", "METHODS", "AllToAllProblem", "AllToAllResult", "AllToAllSchedule",
           "Route", "build_problem", "solve_alltoall", "verify"]
