"""Engine work in child processes: jobs with progress and cancellation, their priority, the
garbage collector tuned for one computation, and internal errors logged for people.
"""
