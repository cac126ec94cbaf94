"""Choosing what a runtime will run and handing it over: the connection layout chosen by
simulating candidates within the runtime's limits, reduction trees reshaped for a fast
pipeline fill, NCCL graph files and the commands that run an export.
"""
