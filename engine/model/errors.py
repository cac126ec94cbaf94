"""Errors the engine reports to people: each carries one clear sentence."""


class CanopyError(Exception):
    """Base class: ``str(error)`` is one sentence naming the file, node or link at fault."""


class TopologyError(CanopyError):
    """A topology file or model that cannot be used (bad JSON, bad link, unbalanced node...)."""


class ScheduleError(CanopyError):
    """A schedule that fails verification or cannot be built for the requested options."""

