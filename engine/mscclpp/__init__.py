"""MSCCL++ execution plans (github:microsoft/mscclpp): the JSON format, and the plan files
and launcher an export writes.

* :mod:`~canopy.engine.mscclpp.reader`: a plan as the runtime's parser reads it, with its
  structural rules;
* :mod:`~canopy.engine.mscclpp.executor`: a symbolic run on every GPU proving the result;
* :mod:`~canopy.engine.mscclpp.writer`: Canopy's lowered MSCCL programs as plans;
* :mod:`~canopy.engine.mscclpp.timing`: a plan's time in Canopy's execution model;
* :mod:`~canopy.engine.mscclpp.files`: the plan files an export writes, checked, and
  :mod:`~canopy.engine.mscclpp.launcher`: the launcher beside them and the command that
  runs it.
"""
