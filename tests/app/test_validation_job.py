"""On large drawings the validation after an edit runs in an engine job's child process."""

from canopy.app.commands import delete
from canopy.app.docks import validation


def test_a_large_drawing_is_checked_in_a_child_process(window, qtbot, monkeypatch):
    monkeypatch.setattr(validation, "IN_JOB_FROM", 10)   # the 2 x DGX sample: 48 links

    def not_here(topology):
        raise AssertionError("checked on the GUI thread")

    monkeypatch.setattr(validation, "find_problems", not_here)
    doc = window.doc
    window.validation._timer.start()   # the check after opening the sample, as a job
    qtbot.waitUntil(lambda: window.validation.messages()[0].startswith("✓"), timeout=30000)
    cut_off = [k for k in doc.link_keys() if "n0.gpu0" in (doc.link(k).source,
                                                           doc.link(k).target)]
    delete(doc, [], cut_off)   # n0.gpu0 is left without links
    qtbot.waitUntil(lambda: window.validation.messages()[0].startswith("⚠"), timeout=30000)
    assert window.validation.windowTitle().startswith("Validation (")
