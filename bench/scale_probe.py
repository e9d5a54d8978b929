"""bench/scale_probe: the in-process half of bench/scale, run once per tree and size.

bench/scale runs this file with the tree under test first on PYTHONPATH (and as the working
directory), so the same probe measures this tree and an older one. It builds the agent's parts
as the app does (compose.agent, the keyring of the environment), serves each stored credential
named on stdin once, then prints one JSON line with medians in milliseconds:
``status`` (Broker.status), ``tick`` (the tray's per-second tick), ``window`` (the main
window's first open) and ``diagnostics`` (the Diagnostics window's first open), for a desktop
with a tray (without one, the window stands in from the start and never "opens").

Only entry points both trees have: compose.agent, Broker.identity/get_credential/status,
TrayController, TrayApp.tick/show_main_window/show_diagnostics. A UI figure the tree cannot
give (its UI changed shape) is printed as null, never guessed.
"""

import json
import os
import statistics
import sys
import time
from collections.abc import Callable

ROUNDS = 15


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _median(fn: Callable[[], object], rounds: int = ROUNDS) -> float:
    fn()  # warm: first-call imports and caches are not what repeats every second
    return statistics.median(_ms(fn) for _ in range(rounds))


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from app import compose
    from app.broker.flight import Silent
    from exec_helper.options import HelperOptions

    names = [line.strip() for line in sys.stdin if line.strip()]
    parts = compose.agent()
    broker = parts.broker
    for name in names:  # served once each, as kubectl would have done
        opts = HelperOptions(stored=name)
        broker.get_credential(broker.identity(opts), opts, Silent())
    out: dict[str, float | int | None] = {"identities": len(broker.status())}
    out["status"] = _median(broker.status)

    from PySide6.QtWidgets import QApplication

    qt = QApplication.instance() or QApplication([])
    assert isinstance(qt, QApplication)
    try:
        from app.broker.broker import utcnow
        from app.settings import Settings
        from app.ui.controller import TrayController
        from app.ui.tray import TrayApp

        controller = TrayController(parts.core, Settings.load(), utcnow)
        view = TrayApp(controller, tray=True)  # a desktop with a tray: the window opens on demand
        qt.processEvents()
        out["tick"] = _median(view.tick)
        out["window"] = _ms(lambda: (view.show_main_window(), qt.processEvents()))
        out["diagnostics"] = _ms(lambda: (view.show_diagnostics(), qt.processEvents()))
        view.shutdown()
    except (ImportError, AttributeError, TypeError) as e:  # a UI of another shape
        print(f"scale_probe: no UI figures for this tree: {e}", file=sys.stderr)
        out.update(tick=None, window=None, diagnostics=None)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
