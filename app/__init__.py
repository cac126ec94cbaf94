"""Canopy's front ends: the command line (``app.cli``) and the PySide6 editor."""
