"""Jobs sharing one fabric: each job's plan on the network it sees alone, its flows, and how
much the others slow it down under each routing model (source routing, ECMP hashing, vClos
isolation; Han et al., "Isolated Scheduling for Distributed Training Tasks in GPU Clusters",
arXiv:2308.05692), with the flow-level contention model that shares links max-min fairly.
"""
