"""File ▸ Export ▸ MSCCL++ Plan: the default schedule export writes a plan that
check-plan passes, the launcher beside it, and shows the torchrun command."""

import json

from canopy.app.shell import MENUS
from canopy.engine.mscclpp.executor import execute
from canopy.engine.mscclpp.reader import parse_plan
from tests.app.test_export_inspect import solve_in, wait_idle


def test_mscclpp_plan_is_the_first_schedule_export_on_ctrl_e(window):
    export = next(entries for name, _, entries in MENUS if name == "file")
    submenu = next(e for e in export if getattr(e, "name", "") == "export")
    names = [n for n in submenu.entries if isinstance(n, str)]
    assert names.index("export_mscclpp") < names.index("export_msccl")
    assert window.named_actions["export_mscclpp"].shortcut().toString() == "Ctrl+E"


def test_mscclpp_plan_export(window, qtbot, dialogs, tmp_path):
    solve_in(window, qtbot)
    path = tmp_path / "ag.json"
    dialogs.save_path = str(path)
    assert window.solver.exporter.export_mscclpp(path, inplace=False)
    assert window.solver.controller.busy           # runs in the background
    wait_idle(window, qtbot)
    plan = json.loads(path.read_text())
    assert plan["inplace"] is False and plan["collective"] == "allgather"
    assert execute(parse_plan(plan)).checked
    assert (tmp_path / "ag-run.py").exists()
    assert "Exported the MSCCL++ plan" in window.statusBar().currentMessage()
    run = window.solver.exporter.run_dialog
    assert run.isVisible() and "libmscclpp_nccl.so torchrun" in run.command.toPlainText()
    run.close()
