"""The app's garbage collection: cycles that a login thread drops are freed on the GUI thread,
between events, never in the thread that happened to allocate (app/ui/collector.py)."""

import gc
import threading
from typing import ClassVar

from app.ui.collector import GuiCollector


class Cycle:
    """Refers to itself: only the cyclic collector frees it; says which thread did."""

    freed_in: ClassVar[list[str]] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        Cycle.freed_in.append(threading.current_thread().name)


def test_cycles_a_worker_drops_are_freed_on_the_gui_thread(qtbot) -> None:  # type: ignore[no-untyped-def]
    Cycle.freed_in = []
    gc.enable()  # as in the app before the collector starts (tests/ui holds it otherwise)
    collector = GuiCollector(interval_ms=20)
    collector.start()
    try:
        kept: list[object] = []

        def login_thread() -> None:  # drops cycles while it allocates far past gc's threshold
            for _ in range(100):
                Cycle()
                kept.extend([] for _ in range(gc.get_threshold()[0]))

        worker = threading.Thread(target=login_thread, name="login-someone")
        worker.start()
        worker.join()
        assert Cycle.freed_in == []  # nothing was collected in the worker
        qtbot.wait_until(lambda: len(Cycle.freed_in) == 100, timeout=10000)
        assert set(Cycle.freed_in) == {threading.main_thread().name}
        assert not gc.isenabled()
        del kept[:]
    finally:
        collector.stop()
    assert gc.isenabled()  # as it was before start
    gc.disable()  # tests/ui's hold, until the test ends


def test_nothing_is_collected_before_a_threshold_is_passed(qtbot) -> None:  # type: ignore[no-untyped-def]
    collector = GuiCollector()
    gc.collect()
    assert collector.collect() == -1
    kept = [[] for _ in range(2 * gc.get_threshold()[0])]
    assert collector.collect() == 0
    del kept
