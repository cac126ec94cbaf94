"""The model every layer shares: topologies, units and sizes, limits, errors and progress,
schedules and collective plans, workloads, and the independent verifier of a schedule.

This package imports nothing else of the engine.
"""
