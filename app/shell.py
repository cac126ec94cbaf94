"""The editor's menus and tool bars, declared in one place.

Every action has a name in the window's registry (:class:`ActionRegistry`): the window
registers its own, each controller (library, solve, export, compare, fabric) registers
the actions it owns, and every dock its View-menu toggle as ``dock_NAME``. Nothing
outside this module adds to a menu or a tool bar; :func:`build` lays them out from
:data:`MENUS` and :data:`TOOLBARS`, and refuses a name nobody registered. Dynamic
submenus (samples, recent files) and tool-bar widgets are named entries the window
provides as :class:`Submenu` fillers and widgets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QMenu, QToolBar, QWidget

SEPARATOR = "-"


@dataclass(frozen=True)
class Submenu:
    """A menu inside a menu: fixed entries, or filled by the window when shown."""

    name: str
    title: str
    entries: tuple[object, ...] = ()
    dynamic: bool = False


@dataclass(frozen=True)
class Widget:
    """A widget the window provides by name (placed in a tool bar)."""

    name: str


MENUS: list[tuple[str, str, tuple[object, ...]]] = [
    ("file", "&File", (
        "new", "new_from_generator", "open", "edit_generator",
        Submenu("samples", "Open &Sample", dynamic=True),
        Submenu("recent", "Open &Recent", dynamic=True),
        "open_sweep", SEPARATOR, "save", "save_as", SEPARATOR,
        Submenu("import", "&Import", ("import_nccl", "import_ib", "import_graphml")),
        Submenu("export", "&Export", (
            "export_graphml", "export_slurm", SEPARATOR, "export_mscclpp",
            "export_alltoall_msccl", "export_msccl",
            "export_trees", "export_json", "export_image", "export_nccl_graph")),
        SEPARATOR, "quit")),
    ("edit", "&Edit", (
        "undo", "redo", SEPARATOR, "cut", "copy", "paste", "duplicate", "delete", SEPARATOR,
        "select_all", "find")),
    ("view", "&View", (
        "zoom_in", "zoom_out", "zoom_fit", "zoom_reset", SEPARATOR, "snap", SEPARATOR,
        "dock_properties", "dock_validation", "dock_history", SEPARATOR,
        "dock_results", "dock_trees", "dock_plots", "dock_compare", "dock_jobs",
        "dock_alltoall", "dock_design")),
    ("tools", "&Tools", (
        "tool_select", "tool_compute", "tool_switch", "tool_link", "tool_delete")),
    ("arrange", "&Arrange", ("auto_layout",)),
    ("compute", "&Compute", (
        "solve_allgather", "solve_reduce_scatter", "solve_allreduce", "solve_fixed_k",
        "solve_alltoall", SEPARATOR, "cancel", SEPARATOR, "show_cut", "show_load", SEPARATOR,
        "next_tree", "previous_tree", SEPARATOR, "compare", SEPARATOR,
        "analyze_contention")),
    ("help", "&Help", ("quick_start", SEPARATOR, "about", "about_qt")),
]
"""Menu bar: (name, title, entries), left to right."""

TOOLBARS: list[tuple[str, str, tuple[object, ...]]] = [
    ("file", "File", ("new", "new_from_generator", "open", "save", SEPARATOR,
                      "undo_button", "redo_button")),
    ("tools", "Tools", ("tool_select", "tool_compute", "tool_switch", "tool_link",
                        "tool_delete", SEPARATOR, Widget("new_link_bandwidth"), SEPARATOR,
                        "zoom_fit", "auto_layout")),
    ("compute", "Compute", (Widget("solve_button"), "cancel", SEPARATOR,
                            "show_cut", "show_load")),
]
"""Tool bars, top row left to right: (name, title, entries)."""


class ActionRegistry(dict[str, QAction]):
    """Actions by name; a name is registered once."""

    def register(self, actions: dict[str, QAction]) -> None:
        for name, action in actions.items():
            if name in self:
                raise KeyError(f"the action '{name}' is registered twice")
            self[name] = action


def _names(entries: tuple[object, ...]) -> Iterator[str]:
    for entry in entries:
        if isinstance(entry, str) and entry != SEPARATOR:
            yield entry
        elif isinstance(entry, Submenu):
            yield from _names(entry.entries)


def missing(actions: ActionRegistry) -> list[str]:
    """Names the layout places that no one registered."""
    return [n for _, _, entries in (*MENUS, *TOOLBARS) for n in _names(entries)
            if n not in actions]


def _fill(menu: QMenu, entries: tuple[object, ...], actions: ActionRegistry,
          menus: dict[str, QMenu], fillers: dict[str, Callable[[QMenu], None]]) -> None:
    for entry in entries:
        if entry == SEPARATOR:
            menu.addSeparator()
        elif isinstance(entry, Submenu):
            sub = menus[entry.name] = menu.addMenu(entry.title)
            if entry.dynamic:
                fillers[entry.name](sub)
                sub.aboutToShow.connect(lambda s=sub, f=fillers[entry.name]: f(s))
            _fill(sub, entry.entries, actions, menus, fillers)
        else:
            assert isinstance(entry, str)
            menu.addAction(actions[entry])


def build(window: QMainWindow, actions: ActionRegistry,
          fillers: dict[str, Callable[[QMenu], None]], widgets: dict[str, QWidget]
          ) -> tuple[dict[str, QMenu], dict[str, QToolBar]]:
    """Build the menu bar and the tool bars of ``window``; returns them by name."""
    absent = missing(actions)
    if absent:
        raise KeyError(f"the layout names actions no one registered: {', '.join(absent)}")
    menus: dict[str, QMenu] = {}
    for name, title, entries in MENUS:
        menu = menus[name] = window.menuBar().addMenu(title)
        _fill(menu, entries, actions, menus, fillers)
    bars: dict[str, QToolBar] = {}
    for name, title, entries in TOOLBARS:
        bar = bars[name] = QToolBar(title, window)
        bar.setObjectName(f"{title.replace(' ', '')}ToolBar")
        window.addToolBar(bar)
        for entry in entries:
            if entry == SEPARATOR:
                bar.addSeparator()
            elif isinstance(entry, Widget):
                bar.addWidget(widgets[entry.name])
            else:
                assert isinstance(entry, str)
                bar.addAction(actions[entry])
    return menus, bars
