"""Sweeps: many generated designs, each solved and compared, one tidy row per point.

* :mod:`~canopy.engine.sweep.spec`: the TOML spec and its points (parameter grids);
* :mod:`~canopy.engine.sweep.point`: what one point computes (bound, ForestColl,
  baselines, simulated algbw per size);
* :mod:`~canopy.engine.sweep.advice`: the design advice's columns of a row;
* :mod:`~canopy.engine.sweep.runner`: running the points on this machine's cores or on a
  Ray cluster, with a per-point time limit, resuming from the rows already written.
"""
