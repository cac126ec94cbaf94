"""Dock widgets around the canvas: properties, validation, the last solve's results and trees,
the plots, the comparison with today's schedules, the jobs sharing a fabric, and the banner
each result dock shows when its results are missing or stale.
"""
