"""The network as the algorithms see it: the indexed directed network, one maxflow interface
with its backends, integer-capacity multigraphs, physical routing, and the symmetry of
identical servers.
"""
