"""ForestColl against the schedules people run today, in one execution model, and the series
behind the editor's plots.
"""
