"""The drawing surface: scene items mirroring the document, the view and the mouse tools."""
