"""Help ▸ Quick Start: one short page that walks a first solve and export."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

PAGE = """
<h2>Quick Start</h2>
<p>Canopy finds the exactly optimal allgather, reduce-scatter and allreduce schedule
(a forest of spanning trees, ForestColl) for the network you draw, and exports it.</p>
<ol>
<li><b>Get a network.</b> The editor opens on 2 x DGX A100. Or use File ▸ Open Sample,
File ▸ New from Generator… (Ctrl+Shift+N: clusters, tori, meshes…), or File ▸ Import ▸
NCCL topology XML. Green boxes are GPUs, blue hexagons switches; numbers on links are GB/s
(another unit is written out: 400 Gb/s).
</li>
<li><b>Edit if you like.</b> Select with S, add a GPU with C, a switch with W, drag a link
with L; change bandwidths in the Properties dock. The Validation dock (bottom) says when
the network is ready (balanced and connected).</li>
<li><b>Solve.</b> Press <b>F5</b> (Compute ▸ Solve Allgather; Shift+F5 reduce-scatter,
Ctrl+F5 allreduce). The <b>Results</b> dock gives the optimal algbw and the
<b>bottleneck cut</b> S* in words (which GPUs it holds and the links their data must leave
by); on the canvas the smaller side of the cut is shaded and the links leaving S* are dark
with arrows.</li>
<li><b>Inspect.</b> The Trees dock lists the trees; click one (or press [ and ]) to draw
it through the switches with hop numbers. Compute ▸ Show Link Load colours links by
use. Edit ▸ Find (Ctrl+F) finds a node or link by name.</li>
<li><b>Export.</b> File ▸ Export ▸ MSCCL++ Plan (Ctrl+E) writes the schedule as an MSCCL++
execution plan with a launcher (checked by a symbolic run first); MSCCL XML, the trees and
the schedule JSON are there too.</li>
<li><b>Compare.</b> Compute ▸ Compare Algorithms… (Ctrl+Shift+C) simulates ForestColl
against NCCL-style rings, Blink, TACOS and contention-free rings.</li>
</ol>
<p>Zoom with the wheel or Ctrl+0 (fit); far out, a server folds into one block showing its
GPUs and the bandwidth leaving it; hover over anything for its full name and numbers.</p>
<p>The same from the command line: <code>canopy solve FILE</code>,
<code>canopy solve FILE --msccl out.xml</code>, <code>canopy compare FILE</code>.</p>
"""


class QuickStart(QDialog):
    """The Quick Start page in a resizable window."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Canopy Quick Start")
        layout = QVBoxLayout(self)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(True)
        self.browser.setHtml(PAGE)
        layout.addWidget(self.browser)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(620, 560)
