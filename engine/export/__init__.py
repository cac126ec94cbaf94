"""Exports of schedules other than MSCCL XML (see :mod:`canopy.engine.msccl`)."""

from canopy.engine.export.trees_xml import trees_xml, write_trees_xml

__all__ = ["trees_xml", "write_trees_xml"]
