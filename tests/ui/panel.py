"""A panel, as far as a StatusNotifierItem can tell: a real StatusNotifierWatcher
(`status-notifier-watcher`, from Debian's haskell-status-notifier-item-utils, the watcher of
taffybar's status-notifier-item library) and this host beside it, which does what a panel does
over D-Bus: registers as a host, reads the items and their properties, fetches the dbusmenu
layout, sends AboutToShow and clicked events, and counts the signals an item sends.

Qt serves the item from the GUI thread, so every call is made on a worker thread while
``pump`` (Qt's event loop, in a test: ``qtbot.wait``) keeps the item answering.
"""

import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jeepney import (
    DBusAddress,
    HeaderFields,
    MatchRule,
    Message,
    MessageType,
    Properties,
    message_bus,
    new_error,
    new_method_call,
    new_method_return,
)
from jeepney.io import blocking
from jeepney.io.threading import DBusRouter, open_dbus_connection

WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
ITEM = "org.kde.StatusNotifierItem"
MENU = "com.canonical.dbusmenu"
HOST = "org.kde.StatusNotifierHost-kubetray-tests"


def watcher_installed() -> bool:
    return shutil.which("status-notifier-watcher") is not None


@contextmanager
def running_watcher() -> Iterator[subprocess.Popen[bytes]]:
    """The real StatusNotifierWatcher on the session bus until the block ends, answering.

    This watcher takes its bus name first and exports its object a moment later
    (status-notifier-item's startWatcher: requestName, then export): a call in between gets
    UnknownObject. So it is ready once its object answers, not once its name is owned."""
    proc = subprocess.Popen(
        ["status-notifier-watcher"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with open_dbus_router() as router:
            watcher = DBusAddress(WATCHER_PATH, bus_name=WATCHER, interface=WATCHER)
            version = Properties(watcher).get("ProtocolVersion")
            deadline = time.monotonic() + 10
            while True:
                assert proc.poll() is None, "status-notifier-watcher exited"
                reply = router.send_and_get_reply(version, timeout=2)
                if reply.header.message_type.name != "error":
                    break
                assert time.monotonic() < deadline, f"the watcher never answered: {reply.body}"
                time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(5)


class LateWatcher:
    """What a StatusNotifierWatcher that takes its name before its object is there looks like to
    an item: status-notifier-watcher does it for a moment (requestName, then export); this one
    stretches that moment to ``late`` seconds from the first call, answering UnknownObject
    meanwhile, then keeps a list of items as a watcher does. Which items registered, and when,
    is in ``registered``."""

    def __init__(self, late: float) -> None:
        self.late = late
        self.registered: list[tuple[float, str]] = []
        self.refused = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(10), "the late watcher never took its name"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def items(self) -> list[str]:
        return sorted({name for _, name in self.registered})

    def _serve(self) -> None:
        with blocking.open_dbus_connection("SESSION") as conn:
            (got,) = conn.send_and_get_reply(message_bus.RequestName(WATCHER, 4)).body
            assert got == 1, f"RequestName answered {got}"  # the primary owner
            answers_from: float | None = None  # ``late`` from the first call (a loaded
            self._ready.set()  # machine may take a while to ask at all)
            while not self._stop.is_set():
                try:
                    msg = conn.receive(timeout=0.1)
                except TimeoutError:
                    continue
                if msg.header.message_type is not MessageType.method_call:
                    continue
                if answers_from is None:
                    answers_from = time.monotonic() + self.late
                if time.monotonic() < answers_from:
                    self.refused += 1
                    path = msg.header.fields.get(HeaderFields.path)
                    error = "org.freedesktop.DBus.Error.UnknownObject"
                    conn.send(new_error(msg, error, "s", (f"no object at {path}",)))
                    continue
                conn.send(self._answer(msg))

    def _answer(self, msg: Message) -> Message:
        member = msg.header.fields.get(HeaderFields.member)
        if member == "RegisterStatusNotifierItem":
            (service,) = msg.body
            if service.startswith("/"):  # a path: the item is the sender's
                service = f"{msg.header.fields.get(HeaderFields.sender)}{service}"
            self.registered.append((time.monotonic(), service))
            return new_method_return(msg)
        if member == "RegisterStatusNotifierHost":
            return new_method_return(msg)
        values = {
            "RegisteredStatusNotifierItems": ("as", self.items()),
            "IsStatusNotifierHostRegistered": ("b", True),
            "ProtocolVersion": ("i", 0),
        }
        if member == "Get" and msg.body[1] in values:
            return new_method_return(msg, "v", (values[msg.body[1]],))
        if member == "GetAll":
            return new_method_return(msg, "a{sv}", (values,))
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", (str(member),))


@contextmanager
def late_watcher(late: float) -> Iterator[LateWatcher]:
    """A StatusNotifierWatcher whose object answers ``late`` seconds after it took its name."""
    watcher = LateWatcher(late)
    watcher.start()
    try:
        yield watcher
    finally:
        watcher.stop()


@contextmanager
def open_dbus_router() -> Iterator[DBusRouter]:
    conn = open_dbus_connection("SESSION")
    try:
        with DBusRouter(conn) as router:
            yield router
    finally:
        conn.close()


class Panel:
    """A StatusNotifierHost driving kubetray's item the way a panel does."""

    def __init__(self, router: DBusRouter, pump: Callable[[int], None]) -> None:
        self.router = router
        self.pump = pump
        self.signals: queue.Queue[Message] = queue.Queue()
        self._filter: Any = None

    def call(self, address: DBusAddress, method: str, signature: str = "", body: tuple = ()) -> Any:
        return self.send(new_method_call(address, method, signature, body))

    def send(self, message: Message, timeout: float = 5.0) -> Any:
        """Send a call from a worker thread, keeping Qt's loop running meanwhile."""
        out: dict[str, Any] = {}

        def work() -> None:
            try:
                out["reply"] = self.router.send_and_get_reply(message, timeout=timeout)
            except Exception as e:  # handed to the test's thread
                out["error"] = e

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        while thread.is_alive():
            self.pump(10)
        if "error" in out:
            raise out["error"]
        reply = out["reply"]
        if reply.header.message_type.name == "error":
            error = reply.header.fields.get(HeaderFields.error_name)
            raise RuntimeError(f"{message.header.fields}: {error} {reply.body}")
        return reply.body

    # -- the watcher --------------------------------------------------------------------------

    @property
    def watcher(self) -> DBusAddress:
        return DBusAddress(WATCHER_PATH, bus_name=WATCHER, interface=WATCHER)

    def register(self) -> None:
        """Say to the watcher that a host is here (a panel does this when it starts)."""
        self.call(self.watcher, "RegisterStatusNotifierHost", "s", (HOST,))

    def items(self) -> list[str]:
        (value,) = self.send(Properties(self.watcher).get("RegisteredStatusNotifierItems"))
        return list(value[1])

    def item(self) -> DBusAddress:
        """kubetray's item (the only one): its address on the bus."""
        [service] = self.items()
        bus, _, path = service.partition("/")
        return DBusAddress(
            "/" + path if path else "/StatusNotifierItem", bus_name=bus, interface=ITEM
        )

    # -- the item -----------------------------------------------------------------------------

    def properties(self) -> dict[str, Any]:
        (values,) = self.send(Properties(self.item()).get_all())
        return {key: value for key, (_sig, value) in values.items()}

    def menu(self) -> DBusAddress:
        path = self.properties()["Menu"]
        return DBusAddress(path, bus_name=self.item().bus_name, interface=MENU)

    def layout(self) -> list[dict[str, Any]]:
        """The menu as a panel draws it: visible entries, each {id, label, enabled, children}."""
        _revision, root = self.call(self.menu(), "GetLayout", "iias", (0, -1, []))
        return [entry for entry in (_entry(child) for child in root[2]) if entry is not None]

    def about_to_show(self, ident: int = 0) -> bool:
        (update,) = self.call(self.menu(), "AboutToShow", "i", (ident,))
        return bool(update)

    def click(self, label: str, within: str | None = None) -> None:
        """Click the visible entry ``label`` (in the submenu whose label starts ``within``)."""
        entries = self.layout()
        if within is not None:
            [row] = [e for e in entries if e["label"].startswith(within)]
            self.about_to_show(row["id"])
            entries = row["children"]
        [entry] = [e for e in entries if e["label"] == label]
        self.call(
            self.menu(), "Event", "isvu", (entry["id"], "clicked", ("i", 0), int(time.time()))
        )

    def activate(self) -> None:
        """A left click on the icon."""
        self.call(self.item(), "Activate", "ii", (0, 0))

    # -- what the item sends -------------------------------------------------------------------

    def listen(self) -> None:
        """Count from now on every signal the item's connection sends (a panel's match rules)."""
        rule = MatchRule(type="signal", sender=self.item().bus_name)
        self.send(message_bus.AddMatch(rule))
        self._filter = self.router.filter(rule, queue=self.signals)

    def received(self, settle: int = 300) -> list[str]:
        """The members of the signals received since the last look."""
        self.pump(settle)
        out = []
        while True:
            try:
                out.append(str(self.signals.get_nowait().header.fields.get(3)))  # member
            except queue.Empty:
                return out


def _entry(node: Any) -> dict[str, Any] | None:
    """A dbusmenu layout node (ia{sv}av) as a dict; None when the panel would not show it."""
    ident, props, children = node[1] if isinstance(node, tuple) and len(node) == 2 else node
    values = {key: value for key, (_sig, value) in props.items()}
    if values.get("visible", True) is False:
        return None
    return {
        "id": ident,
        "label": str(values.get("label", "")).replace("&&", "&"),
        "separator": values.get("type") == "separator",
        "enabled": values.get("enabled", True),
        "children": [e for e in (_entry(child) for child in children) if e is not None],
    }
