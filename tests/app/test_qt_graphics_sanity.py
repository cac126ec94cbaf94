"""Guards against Qt binding releases whose graphics-item virtuals corrupt reference counts."""

import sys

from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene


class _Item(QGraphicsItem):
    def boundingRect(self):
        return QRectF(0, 0, 10, 10)

    def paint(self, painter, option, widget=None):
        pass


def test_moving_python_items_keeps_none_reference_count(qapp):
    # PySide6 6.12.0 drops a reference to None on every itemChange dispatch of a Python
    # item; the editor moves thousands of items, and the interpreter aborts at exit.
    scene = QGraphicsScene()
    item = _Item()
    item.setFlag(QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
    scene.addItem(item)
    before = sys.getrefcount(None)
    for i in range(3000):
        item.setPos(i, i)
    assert abs(sys.getrefcount(None) - before) < 100
    scene.removeItem(item)
