"""Python's cyclic garbage collector, run by the app on the GUI thread, between events.

Left to itself the collector runs in whichever thread allocates past its threshold: a login
thread, the IPC server's, or the GUI thread in the middle of a signal's delivery. A Qt wrapper
caught in a reference cycle is then destroyed there, under objects another thread is using
(the tests met this as "Fatal Python error: Aborted" with the main thread "Garbage-collecting";
docs/gotchas.md). The app turns automatic collection off and collects from a timer on the GUI
thread instead, by the same thresholds, the way pyqtgraph's and napari's apps do: every thread
still frees what has no cycle at once, and cycles wait at most one tick.
"""

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 1000
"""How often the GUI thread looks whether a collection is due."""


class GuiCollector(QObject):
    """Collects on the GUI thread; ``start`` turns automatic collection off, ``stop`` puts it
    back as it was."""

    def __init__(self, interval_ms: int = INTERVAL_MS, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect)

    def start(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        if self._was_enabled:
            gc.enable()

    def collect(self) -> int:
        """Collect the generation gc's own thresholds make due; returns it (-1: none was)."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        for generation in (2, 1, 0):
            if counts[generation] > thresholds[generation]:
                gc.collect(generation)
                return generation
        return -1
