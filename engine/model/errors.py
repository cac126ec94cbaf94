"""Errors the engine reports to people: each carries one clear sentence."""


class CanopyError(Exception):
    """Base class: ``str(error)`` is one sentence naming the file, node or link at fault."""


class TopologyError(CanopyError):
    """A topology file or model that cannot be used (bad JSON, bad link, unbalanced node...)."""


class ScheduleError(CanopyError):
    """A schedule that fails verification or cannot be built for the requested options."""



MAX_SENTENCE = 600
"""Characters of an error sentence shown; the rest (a long value quoted) is cut."""


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks, tabs and other control characters
    that a file's values can carry into a sentence are shown escaped, and a sentence
    quoting a very long value is cut to :data:`MAX_SENTENCE` characters.

    """
    shown = "".join(ch if ch.isprintable() or ch == " " else
                    repr(ch)[1:-1] for ch in text)
    return shown if len(shown) <= MAX_SENTENCE else shown[:MAX_SENTENCE - 1] + "…"
