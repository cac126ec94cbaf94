"""Dock widgets around the canvas: properties, validation, undo history."""
