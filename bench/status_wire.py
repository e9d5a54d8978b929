"""bench/status_wire: what ``kubetray status`` costs the agent at N identities (issue 39).

The agent answers status with Broker.status() turned into JSON (app/agent/service.py). At 400
stored identities that was 33.5 ms over the socket, most of it ``dataclasses.asdict``'s deep
copy of every IdentityStatus. This builds N stored credentials in memory (each served once, as
kubectl would), then prints the median of the answer as the agent builds it now beside the
same answer built with ``asdict`` (the way before), measured in the same run, and their ratio.

    .venv/bin/python bench/status_wire.py [N ...]     (default: 10 100 400)
"""

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _median_ms(fn: Callable[[], object], rounds: int = 21) -> float:
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(n: int) -> tuple[float, float]:
    tmp = Path(tempfile.mkdtemp(prefix="kt-status-"))
    os.environ["KUBETRAY_CONFIG_DIR"] = str(tmp / "config")
    from app.broker.flight import Silent
    from app.static_credentials import StoredCredential
    from app.store.memory_store import MemorySecretStore
    from exec_helper.options import HelperOptions
    from tests.core import make_core

    core, stored = make_core(tmp, MemorySecretStore())
    try:
        names = [f"bot-{i:03d}" for i in range(n)]
        stored.save_all(
            [StoredCredential(name=x, token=f"t-{x}") for x in names], datetime.now(UTC)
        )
        broker = core.broker
        for name in names:
            opts = HelperOptions(stored=name)
            broker.get_credential(broker.identity(opts), opts, Silent())

        def before() -> str:
            rows = []
            for s in broker.status():
                row = asdict(s)
                row["state"] = str(s.state)
                rows.append(row)
            return json.dumps({"identities": rows})

        def now() -> str:
            return json.dumps({"identities": [s.to_dict() for s in broker.status()]})

        assert before() == now(), "the two answers differ"
        return _median_ms(before), _median_ms(now)
    finally:
        core.stop()


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [10, 100, 400]
    print(f"{'identities':>10}  {'asdict ms':>9}  {'now ms':>7}  {'ratio':>6}")
    for n in sizes:
        old, new = measure(n)
        print(f"{n:>10}  {old:>9.2f}  {new:>7.2f}  {old / new:>5.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
