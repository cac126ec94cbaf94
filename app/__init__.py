"""Canopy's front ends: the command line (``canopy.cli``) and the PySide6 editor."""
