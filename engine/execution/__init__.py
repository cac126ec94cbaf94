"""The execution model: how long a collective plan takes when a runtime runs it. The program
of sends over connections, the event loop that runs it, the compiler from plans to programs,
long loops timed from short runs, and identical servers folded into one.
"""
