"""Every file format Canopy reads or writes: topology JSON, schedule JSON, GraphML, NCCL
topology import and export, the trees XML for people, and safe XML parsing.
"""
