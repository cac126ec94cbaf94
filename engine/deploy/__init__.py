"""Choosing what a runtime will run and handing it over: the best schedule for a collective
(one entry point for every front end), the connection layout chosen by simulating candidates
within the runtime's limits, reduction trees reshaped for a fast pipeline fill, the MSCCL
export pipeline and its per-size files, NCCL graph files, and the commands that run an
export.
"""
