"""The PySide6 editor: the document and its undo commands, the main window, the canvas, docks
and dialogs, and the controllers that run engine jobs off the GUI thread.
"""
