"""The model every layer shares: topologies and their automatic drawing layout, units and
sizes, limits, errors and progress, the collectives and their algbw, schedules and collective
plans, link loads, workloads, and the independent verifier of a schedule.

This package imports nothing else of the engine.
"""
