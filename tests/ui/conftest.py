"""tests/ui: Python's cyclic garbage collector waits until a test is over.

In a long tests/ui run, a collection that started inside Qt's event loop (pytest-qt's
waitSignal) aborted the process ("Fatal Python error: Aborted", the main thread
"Garbage-collecting") while a login thread was still running: a Qt wrapper left in a cycle was
destroyed under an object another thread was using. With the collector held during the test
and run at its end, after the threads of that test have finished, the same garbage goes
without a race (docs/gotchas.md). This changes when Python frees cycles, not what a test
checks. (The app, run whole, collects on its GUI thread from a timer: app/ui/collector.py.)
"""

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_after_the_test() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()
