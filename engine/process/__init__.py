"""Engine work in child processes: jobs with progress and cancellation, their priority, the
garbage collector and the C allocator tuned for one computation, and internal errors logged
for people.
"""
