"""Editor soak (bounded): a few hundred random actions on a real window with the
invariants of bench/editor_soak.py after each (no exception reaches Qt's event loop,
results shown as current belong to the document, save + reopen and the recovery file
give the document) and, every 25 actions and at the end, undoing everything gives back
the document as opened. ``bench/editor_soak.py`` runs thousands."""

import random

import pytest

from bench.editor_soak import Soak, plain


@pytest.mark.parametrize("seed", [2, 5])
def test_random_actions_keep_every_invariant(window, tmp_path, seed):
    window.doc.set_topology(window.doc.topology, None, display_name="dgx-a100-2x8.json")
    driver = Soak(window, random.Random(seed), tmp_path)
    try:
        driver.run(150, check_every=25)
    finally:
        driver.close()
        window.solver.controller.cancel()
        window.solver.controller.wait(10_000)
    assert driver.problems == [], driver.errors[:2]
    assert driver.errors == []
    assert sum(driver.counts.values()) == 150


def test_undo_all_after_an_open_gives_the_opened_file(window, tmp_path):
    driver = Soak(window, random.Random(1), tmp_path)
    try:
        driver.do_open()
        opened = plain(window)
        for _ in range(10):
            driver.do_add()
            driver.do_link()
        window.doc.undo_stack.setIndex(0)
        assert plain(window) == opened
    finally:
        driver.close()
