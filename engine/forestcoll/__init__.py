"""ForestColl: the exact allgather optimum and its bottleneck cut, the fewest trees per node,
switch removal by edge splitting, spanning-tree packing and the whole solve.

Zhao et al., "ForestColl: Efficient Collective Communications on Heterogeneous Network
Fabrics", arXiv:2402.06787.
"""
