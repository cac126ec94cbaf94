"""The execution model: how long a collective plan takes when a runtime runs it. The
simulator of sends over connections, and identical servers folded into one.
"""
