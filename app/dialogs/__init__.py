"""Dialogs of the editor: new from a generator (with its parameter fields and live preview),
NCCL topology XML import, and a sweep's results.
"""
