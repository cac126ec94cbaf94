"""Allreduce beyond reduce-scatter + allgather: the linear program of ForestColl's App. E
(Zhao et al., arXiv:2402.06787), its cut-generation form, integer rounding, the exact
schedule built from it, and spanning trees on two-way links.
"""
