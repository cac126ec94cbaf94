"""Dialogs of the editor: new from generator, NCCL topology import, import warnings."""
