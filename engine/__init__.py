"""Canopy's engine: topologies, the ForestColl optimum, schedules and their exports.

Pure Python plus numerical libraries; it never imports Qt.
"""
