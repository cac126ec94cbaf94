"""The flow-level contention model: max-min fair sharing of links among concurrent jobs.

Each job's flows (:mod:`canopy.engine.fabric.plans`) are pipelined: a collective
advances at the pace of its slowest connection, so a job's flows move in lock step, the
flow of largest volume V̂ at rate ρ and any other at ρ·V/V̂. On a directed link e of
capacity c_e the jobs then need Σ_j u_je·ρ_j ≤ c_e, where u_je counts job j's flows on
e in units of V̂_j. Links are shared fairly per flow (as RoCE/TCP congestion control
shares a bottleneck): progressive filling raises the rate ρ of every unfrozen job
together until some link is full, freezes the jobs with flows on it, and repeats. This
is max-min fairness over the jobs' flow rates (Bertsekas & Gallager, Data Networks,
§6.5.2); it takes at most one round per job.

Relation to the execution model (:mod:`canopy.engine.execution.simulate`): alone, a job's
bandwidth-only time ``V̂·M/ρ_alone`` is exactly the congestion bound of its plan
(:func:`canopy.engine.model.plan.bandwidth_bound`); the execution model adds latency and
pipeline fill to it. Contention stretches only the bandwidth part, so a job's completion
time is ``alone_us + (ρ_alone/ρ - 1)·bandwidth_us``, and its slowdown ``ρ_alone/ρ``
(latency-bound jobs are hurt less than this, which the completion time shows).
tests/engine/fabric/test_fabric.py checks the model against the execution model running the
jobs' plans together, on their source routes and on each seed's ECMP routes
(:func:`canopy.engine.fabric.analysis.ecmp_plan`): the last job's completion times agree
within 3 %.
"""

from __future__ import annotations

import numpy as np

REL_EPS = 1e-9


def fair_rates(usage: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair flow rates: ``usage[j, e]`` flows of job j (in units of its largest)
    on link e of ``capacity[e]``; returns each job's rate ρ_j (0 for jobs with no flow)."""
    jobs = usage.shape[0]
    rate = np.zeros(jobs)
    active = (usage > 0).any(axis=1)
    residual = capacity.astype(float).copy()
    while active.any():
        weight = usage[active].sum(axis=0)
        used = weight > 0
        step = float((residual[used] / weight[used]).min())
        rate[active] += step
        residual -= step * weight
        full = used & (residual <= REL_EPS * capacity)
        hit = active & (usage[:, full] > 0).any(axis=1)
        active &= ~hit
    return rate


def alone_rates(usage: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each job's rate with the links to itself: min over its links of c_e / u_je."""
    with np.errstate(divide="ignore"):
        ratio = np.where(usage > 0, capacity / np.where(usage > 0, usage, 1), np.inf)
    return ratio.min(axis=1, initial=np.inf)
