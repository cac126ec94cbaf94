"""Design advice for a topology, exactly: its links grouped into classes, the optimum as a
function of each class's bandwidth, the optimum after each single failure, and the cheapest
change of class bandwidths that reaches a target optimum (ForestColl's cut condition, Zhao
et al., arXiv:2402.06787, §3.1 eq. (1)), reported as canopy-advice JSON and as text
(docs/advise.md).
"""
