"""Baseline collective schedules to compare ForestColl with: NCCL/RCCL-style rings, Blink's
single-root tree packing, TACOS (Won et al., "TACOS: Topology-Aware Collective Algorithm
Synthesizer for Distributed Machine Learning", arXiv:2304.05301) and contention-free logical
rings (Faraj, Patarasuk and Yuan, "Bandwidth Efficient All-to-All Broadcast on Switched
Clusters", IEEE Cluster 2005).

Each baseline is a function of a topology returning a
:class:`~canopy.engine.model.plan.BaselineResult`: the schedule the algorithm would run,
its bandwidth-only algbw on the physical links, and a plan the simulator can run.
"""
