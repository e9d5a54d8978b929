"""The tray icon and its menu; where there is no tray, the main window is the app. Thin: it
shows what the controller reports and forwards clicks.

The icon comes and goes with the desktop's tray (``TrayHost``): a panel that starts after
kubetray, restarts, or is removed. Without one (GNOME without the AppIndicator extension) the
main window stands in, with every action the menu has.

The menu is built once and then only changed where the state changed: each identity is a row
(``IdentityRow``) with a fixed set of entries whose text and visibility follow its state, so a
StatusNotifierItem host gets an ItemsPropertiesUpdated for what changed instead of a new
layout, and the tooltip and icon are sent only when they differ.

With more than MENU_IDENTITIES identities the menu is still a menu: it shows the ones that
matter now (``that_matter``) and *All N identities…*, which opens the main window with its
filter focused. Rows exist only for the identities shown, so a tick costs the same at 500.
"""

import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QMenu,
    QMessageBox,
    QSystemTrayIcon,
    QWidget,
)
from shiboken6 import Shiboken

from app.model import IdentityStatus, State
from app.ui import icons
from app.ui.controller import TrayController
from app.ui.dialogs import (
    AddClusterDialog,
    ConsentDialog,
    SettingsDialog,
    ask_login,
    consent_key,
)
from app.ui.notify import DEFAULT, DesktopNotifications
from app.ui.text import details, elide, time_left, who
from app.ui.tray_host import TrayHost
from app.ui.views import (
    DeviceCodeWindow,
    DiagnosticsWindow,
    LinkWindow,
    bring_to_front,
    show_about,
)
from app.ui.window import MainWindow


def dispose(obj: QObject) -> None:
    """Close and destroy a parentless Qt object now, through shiboken.

    deleteLater() would free the C++ side behind shiboken's back, and PySide's clean-up at exit
    then deletes it a second time (a crash when the process ends).
    """
    if not Shiboken.isValid(obj):
        return
    if isinstance(obj, QWidget):
        obj.close()
    Shiboken.delete(obj)


NOTIFICATIONS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "login": ("login", (("login", "Log in"),)),
    "expiring": ("login", (("login", "Log in"),)),
    "refresh": ("login", (("login", "Log in"),)),
    "failure": ("show", (("login", "Log in"),)),
    "browser": ("open", (("open", "Open login page"), ("copy", "Copy link"))),
    "waiting": ("open", (("open", "Open login page"), ("copy", "Copy link"))),
    "remote": ("show", ()),
}
"""Each kind of notification: what a click on it does (its ``default`` action) and its buttons,
by key (see _notification_action)."""
MOOT_ONCE_LOGGING_IN = {"login", "expiring", "refresh", "failure"}
"""Kinds a login that starts answers: withdrawn then (the person is on it)."""
MOOT_WHEN_DONE = {"login", "waiting", "browser"}
"""Kinds withdrawn when the login ends (signed in, cancelled, or failed: then a failure says
why)."""
MOOT_WHEN_SIGNED_IN = {"login", "expiring", "refresh", "failure"}
"""Kinds withdrawn once the identity is signed in however it happened."""

EXPIRES_MS = {"updated": 20_000}
"""Notifications that only tell, and never become moot by an answer: gone after this long
(a service that keeps them, such as mako, would show "kubetray was updated" for ever)."""
IDLE_LOOK = 60.0
"""Seconds between looks at the core when nothing said it changed (a state that changes at a
moment the view does not know, such as a credential's start)."""
STAND_IN_RACE = 60.0
"""Seconds after the window came up for a missing tray in which a tray that appears takes its
place again (the panel was on its way); later the person may be using it, and it stays."""

MENU_TEXT = 60
"""The longest text in the menu: a login URL once made it as wide as the screen."""

MENU_IDENTITIES = 8
"""The most identities the menu lists; beyond, the ones that matter and *All N identities…*."""

SOON = timedelta(hours=1)
"""An identity that expires within this is worth a line in a crowded menu."""


def that_matter(
    identities: list[IdentityStatus], now: datetime, limit: int = MENU_IDENTITIES
) -> list[IdentityStatus]:
    """The identities a crowded menu shows, in their usual order: all of them up to ``limit``;
    beyond, first those logging in now, then those that need the person (a login, an error),
    then those expiring soonest (within SOON), then the most recently used by kubectl."""
    if len(identities) <= limit:
        return identities

    def rank(ident: IdentityStatus) -> tuple[int, float]:
        if ident.state is State.LOGGING_IN:
            return (0, 0.0)
        if ident.state in (State.NEEDS_LOGIN, State.EXPIRED, State.ERROR, State.NOT_YET_VALID):
            return (1, 0.0)
        if ident.expires:
            left = (datetime.fromisoformat(ident.expires) - now).total_seconds()
            if ident.state is State.EXPIRING or left < SOON.total_seconds():
                return (2, left)
        if ident.last_used:
            return (3, -datetime.fromisoformat(ident.last_used).timestamp())
        return (4, 0.0)

    order = {ident.name: i for i, ident in enumerate(identities)}
    chosen = sorted(identities, key=lambda i: (rank(i), order[i.name]))[:limit]
    return sorted(chosen, key=lambda i: order[i.name])


def menu_text(text: str, limit: int = MENU_TEXT) -> str:
    """``text`` for a QAction: one line, at most ``limit`` characters (the middle elided), and
    ``&`` doubled so that Qt shows it instead of making the next letter a shortcut."""
    return elide(" ".join(text.split()), limit).replace("&", "&&")


def clipboard_from_anywhere() -> bool:
    """Whether the clipboard can be set from a tray menu or a notification. A Wayland
    compositor gives it only to a focused window of ours with recent input: there *Copy link*
    opens a small window whose Copy button does it."""
    return QGuiApplication.platformName() != "wayland"


def next_change(identities: list[IdentityStatus], now: datetime, margin: timedelta) -> float:
    """Seconds until what the views say of ``identities`` changes with time alone: the next
    whole minute of a "54m left", every second of a last minute, the moment a token enters
    the refresh ``margin`` (it reads "expiring"); at most IDLE_LOOK."""
    wait = IDLE_LOOK
    for ident in identities:
        if not ident.expires:
            continue
        left = (datetime.fromisoformat(ident.expires) - now).total_seconds()
        if left <= 0:
            continue  # "expired" stays; the core says when it refreshes or fails
        wait = min(wait, 1.0 if left <= 60 else left % 60 + 0.05)
        if (into_margin := left - margin.total_seconds()) > 0:
            wait = min(wait, into_margin + 0.05)
    return max(wait, 0.05)


def _update(
    action: QAction,
    text: str | None = None,
    visible: bool | None = None,
    enabled: bool | None = None,
) -> None:
    """Change only what differs: each change is a D-Bus signal to a StatusNotifierItem host."""
    if text is not None and action.text() != text:
        action.setText(text)
    if visible is not None and action.isVisible() != visible:
        action.setVisible(visible)
    if enabled is not None and action.isEnabled() != enabled:
        action.setEnabled(enabled)


class IdentityRow:
    """One identity in the menu: its line, and a submenu with every action it can have, shown
    or hidden by state, so a change of state changes properties, not the layout."""

    def __init__(self, app: "TrayApp", name: str) -> None:
        c = app.controller
        self.name = name
        self.menu = QMenu(name.replace("&", "&&"))
        sub = self.menu
        self.detail = sub.addAction("")
        self.detail.setEnabled(False)
        self.clusters = sub.addAction("")
        self.clusters.setEnabled(False)
        sub.addSeparator()
        self.open = sub.addAction("Open login page", partial(app.open_login_page, name))
        self.copy = sub.addAction("Copy link", partial(app.copy_link, name))
        self.cancel = sub.addAction("Cancel login", partial(c.cancel, name))
        self.log_in = sub.addAction("Log in", partial(c.log_in, name))
        self.log_out = sub.addAction("Log out", partial(c.log_out, name))
        self.switch = sub.addAction("Switch account…", partial(app.switch_account, name))
        self.oidc_separator = sub.addSeparator()
        self.remove = sub.addAction("Remove identity…", partial(app.remove, name))
        self.action = self.menu.menuAction()

    def update(self, app: "TrayApp", ident: IdentityStatus, now: Any) -> None:
        c = app.controller
        _update(self.action, app.line(ident, now))
        issuer = urlsplit(ident.issuer).netloc if ident.issuer else ""
        detail = [who(ident) or issuer or ident.kind]
        if details(ident):
            detail.append(details(ident))
        left = time_left(ident.expires, now)
        if left:
            detail.append(left)
        _update(self.detail, menu_text("  ·  ".join(detail)))
        hosts = [urlsplit(c).netloc or c for c in ident.clusters]
        _update(self.clusters, menu_text("Used for " + ", ".join(hosts)), visible=bool(hosts))
        self.clusters.setToolTip("\n".join(ident.clusters))
        oidc = ident.logs_in
        busy = oidc and ident.state is State.LOGGING_IN
        signed_out = oidc and ident.state in (State.NEEDS_LOGIN, State.EXPIRED, State.ERROR)
        signed_in = oidc and not busy and not signed_out
        link = bool(c.login_link(ident.name)) if busy else False
        copy = "Copy link" if clipboard_from_anywhere() else "Copy link…"
        _update(self.open, visible=link)
        _update(self.copy, copy, visible=link)
        _update(self.cancel, visible=busy)
        _update(self.log_in, visible=signed_out)
        _update(self.log_out, visible=signed_in)
        _update(self.switch, visible=signed_in)
        _update(self.oidc_separator, visible=oidc)


class TrayApp(QObject):
    """Everything the user sees of kubetray."""

    tray_changed = Signal(bool)
    """The icon appeared in a tray (True) or the window stands in for it (False)."""

    def __init__(
        self,
        controller: TrayController,
        tray: bool | None = None,
        host: TrayHost | None = None,
        wait_for_tray: float = 0.0,
    ) -> None:
        """``tray``: True or False to decide (tests), None to follow the desktop's tray
        (``host``, made here by default). ``wait_for_tray``: seconds to wait at start for a
        tray before the window stands in (started at login, before the panel)."""
        super().__init__()
        self.controller = controller
        self.menu = QMenu()
        self.tray: QSystemTrayIcon | None = None
        self.main_window: MainWindow | None = None
        self.state = icons.overall_state(controller.identities())
        self._tooltip = ""
        self.device_windows: dict[str, DeviceCodeWindow] = {}
        self.consent_dialogs: dict[str, ConsentDialog] = {}
        self.link_windows: dict[str, LinkWindow] = {}
        self.diagnostics: DiagnosticsWindow | None = None
        self.about: QMessageBox | None = None
        self.notifications: list[tuple[str, str, str]] = []
        self.desktop_notifications = DesktopNotifications()
        self.desktop_notifications.action.connect(self._notification_action)
        self._notified: dict[str, str] = {}
        """The kind of the notification about each name that is on screen."""
        self._message: tuple[str, str] | None = None
        """The name and default action of Qt's last message (no desktop service)."""
        self._rows: dict[str, IdentityRow] = {}
        self._order: tuple[str, ...] = ()
        self._retired: list[QMenu] = []
        """Rows removed from the menu: disposed later, one of their actions may be running."""
        self._closed = False
        self._build_menu()
        self.host: TrayHost | None = None
        if tray is None:
            self.host = host or TrayHost()
            self.host.changed.connect(self._host_changed)
            self.host.watcher_back.connect(self._register_again)
            tray = self.host.available
        if tray:
            self._show_tray()
        elif wait_for_tray > 0:
            QTimer.singleShot(int(wait_for_tray * 1000), self._stand_in_if_no_tray)
        else:
            self._stand_in()
        controller.changed.connect(self.refresh)
        controller.started_login.connect(self._started)
        controller.finished_login.connect(self._finished)
        controller.progress.connect(self._on_progress)
        controller.device_code.connect(self.show_device_code)
        controller.prompt.connect(self._prompt)
        controller.consent_asked.connect(self._consent)
        controller.notify.connect(self.show_notification)
        # The core says what changed (controller.changed); this timer only wakes for what
        # changes with time alone: the next minute of a "54m left", an expiry (next_change).
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self.tick)
        self.menu.aboutToShow.connect(self.refresh)  # a kubeconfig edited meanwhile, too
        self.refresh()

    # -- the tray comes and goes ------------------------------------------------------------

    def _host_changed(self, available: bool) -> None:
        if self._closed:
            return
        if available:
            self._show_tray()
        else:
            self._hide_tray()

    def _register_again(self) -> None:
        """A panel's watcher came back and may have refused Qt's registration of the icon (it
        answered late): Qt registers an icon when it is shown, over a connection of its own."""
        if self.tray is not None and not self._closed:
            self.tray.hide()
            self.tray.show()

    def _show_tray(self) -> None:
        if self.tray is not None:
            return
        # The icon before show(): Qt warns "No Icon set" otherwise.
        tray = QSystemTrayIcon(icons.state_icon(self.state))
        tray.setContextMenu(self.menu)
        tray.setToolTip(self._tooltip)
        tray.messageClicked.connect(self._message_clicked)
        tray.activated.connect(self._activated)
        tray.show()
        self.tray = tray
        window = self.main_window
        if window is not None and window.standalone:
            window.set_standalone(False)
            stood_in = window.stood_in_at
            if stood_in is not None and time.monotonic() - stood_in < STAND_IN_RACE:
                window.hide()  # it stood in for a tray that was on its way (a session's start)
        self.tray_changed.emit(True)

    def _hide_tray(self) -> None:
        if self.tray is None:
            return
        self.tray.hide()
        dispose(self.tray)
        self.tray = None
        self._stand_in()
        self.tray_changed.emit(False)

    def _stand_in_if_no_tray(self) -> None:
        if self.tray is None and not self._closed:
            self._stand_in()

    def _stand_in(self) -> None:
        """No tray: the main window is the app (every action of the menu, and Quit)."""
        self.show_main_window()
        assert self.main_window is not None
        self.main_window.set_standalone(True)
        self.main_window.stood_in_at = time.monotonic()

    # -- live state -------------------------------------------------------------------------

    def tick(self) -> None:
        self.controller.check_expiring()
        self.refresh()

    def refresh(self) -> None:
        if self._closed:  # a login thread finishing after Quit
            return
        identities = self.controller.identities()
        now = self.controller.clock()
        state = icons.overall_state(identities)
        shown = that_matter(identities, now)
        tooltip = self._tooltip_text(identities, shown, now)
        if self.tray is not None:
            if state != self.state or self.tray.icon().isNull():
                self.tray.setIcon(icons.state_icon(state))
            if tooltip != self._tooltip:
                self.tray.setToolTip(tooltip)
        self.state, self._tooltip = state, tooltip
        if self.main_window is not None and self.main_window.isVisible():
            self.main_window.update_status(identities, now)
        self._update_menu(identities, shown, now)
        self._withdraw_answered(identities)
        self.timer.start(int(next_change(identities, now, self.controller.logins.margin) * 1000))

    def _tooltip_text(
        self, identities: list[IdentityStatus], shown: list[IdentityStatus], now: Any
    ) -> str:
        if not identities:
            return "kubetray: nothing set up yet"
        lines = [f"{i.name}: {i.state} {time_left(i.expires, now)}".rstrip() for i in shown]
        if len(shown) < len(identities):
            lines.append(f"and {len(identities) - len(shown)} more")
        return "kubetray\n" + "\n".join(lines)

    def line(self, ident: IdentityStatus, now: Any) -> str:
        """The identity's one line in the menu: its name and a short state."""
        return menu_text(f"{ident.name}  ·  {self._short_state(ident, now)}")

    def _short_state(self, ident: IdentityStatus, now: Any) -> str:
        if ident.state is State.LOGGING_IN:
            return self.controller.login_stage(ident.name)
        left = time_left(ident.expires, now)
        if ident.state in (State.READY, State.EXPIRING) and left:
            return f"{ident.state}  ·  {left}"
        return str(ident.state)

    def _build_menu(self) -> None:
        """The parts of the menu that are always there; identity rows go before ``_rows_end``."""
        menu = self.menu
        menu.addAction("Open kubetray", self.show_main_window)
        menu.addSeparator()
        self._empty = menu.addAction("No identities yet: add a cluster, or run kubectl")
        self._empty.setEnabled(False)
        self._more = menu.addAction("", self.show_all_identities)
        self._more.setVisible(False)
        self._notice = menu.addAction("")
        self._notice.setEnabled(False)
        self._notice.setVisible(False)
        self._rows_end = menu.addSeparator()
        self._all = menu.addAction("Log in to all", self.controller.log_in_to_all)
        self._all.setVisible(False)
        menu.addAction("Add cluster…", self.add_cluster)
        menu.addAction("Settings", self.show_settings)
        menu.addAction("Diagnostics", self.show_diagnostics)
        menu.addAction("About kubetray", self.show_about)
        menu.addSeparator()
        menu.addAction("Quit kubetray", QApplication.quit)

    def _update_menu(
        self, identities: list[IdentityStatus], shown: list[IdentityStatus], now: Any
    ) -> None:
        c = self.controller
        names = tuple(i.name for i in shown)
        if names != self._order:
            self._place_rows(names)
        for ident in shown:
            self._rows[ident.name].update(self, ident, now)
        _update(self._empty, visible=not identities)
        more = len(shown) < len(identities)
        _update(self._more, f"All {len(identities)} identities…", visible=more)
        notice = c.store_notice[:1].upper() + c.store_notice[1:] if c.store_notice else ""
        _update(self._notice, menu_text(notice), visible=bool(notice))
        self._notice.setToolTip(notice)
        _update(self._all, visible=len(c.logins.stale(now)) > 1)

    def _place_rows(self, names: tuple[str, ...]) -> None:
        """Identities came or went: rows for new ones, the gone ones retired, in order."""
        for old in self._retired:  # retired at the last change: their actions have run
            dispose(old)
        self._retired = []
        for name in set(self._rows) - set(names):
            row = self._rows.pop(name)
            self.menu.removeAction(row.action)
            self._retired.append(row.menu)
        for name in self._order:
            if name in self._rows:
                self.menu.removeAction(self._rows[name].action)
        for name in names:
            row = self._rows.get(name) or IdentityRow(self, name)
            self._rows[name] = row
            self.menu.insertAction(self._empty, row.action)
        self._order = names

    @property
    def identity_menus(self) -> dict[str, QMenu]:
        """Each identity's submenu, by name."""
        return {name: row.menu for name, row in self._rows.items()}

    def _actions(self, menu: QMenu | None = None) -> list[QAction]:
        """Every visible action of the menu, each identity's submenu right after its line."""
        out: list[QAction] = []
        for action in (menu or self.menu).actions():
            if not action.isVisible():
                continue
            out.append(action)
            sub = action.menu()
            if isinstance(sub, QMenu):
                out.extend(self._actions(sub))
        return out

    def action_texts(self, deep: bool = True) -> list[str]:
        """The menu's visible entries as shown (``&&`` shows as ``&``), submenus too unless not
        ``deep``; for tests and screen readers."""
        actions = self._actions() if deep else [a for a in self.menu.actions() if a.isVisible()]
        return [a.text().replace("&&", "&") for a in actions if a.text()]

    def trigger(self, text: str, identity: str | None = None) -> None:
        """Click the menu entry ``text`` (in ``identity``'s submenu, if given)."""
        scope = self.menu
        if identity is not None:
            scope = self._rows[identity].menu
        for action in self._actions(scope):
            if action.text() == text and action.isEnabled():
                action.trigger()
                return
        raise KeyError(text)

    # -- logins in the desktop --------------------------------------------------------------

    def _on_progress(self, _name: str, _text: str) -> None:
        self.refresh()

    def _started(self, name: str) -> None:
        if self._notified.get(name) in MOOT_ONCE_LOGGING_IN:
            self.withdraw_notification(name)
        self.refresh()

    def _finished(self, name: str, _error: str) -> None:
        window = self.device_windows.pop(name, None)
        if window is not None:
            dispose(window)
        link = self.link_windows.pop(name, None)
        if link is not None:
            dispose(link)
        if self._notified.get(name) in MOOT_WHEN_DONE:
            self.withdraw_notification(name)  # a failure is told next, with why
        elif self.main_window is not None:  # the window's own line about it ("Copied…")
            self.main_window.withdraw_notice(name)
        self.refresh()

    def _withdraw_answered(self, identities: list[IdentityStatus]) -> None:
        """Notifications about an identity that is signed in now, or gone, are moot."""
        states = {i.name: i.state for i in identities}
        for name, kind in list(self._notified.items()):
            if kind == "remote":
                continue  # about a host, not an identity: its dialog withdraws it
            state = states.get(name)
            signed_in = state is State.READY or (state is State.EXPIRING and kind != "expiring")
            if state is None or (kind in MOOT_WHEN_SIGNED_IN and signed_in):
                self.withdraw_notification(name)

    def show_device_code(self, name: str, code: str, uri: str) -> None:
        if self._closed:
            return
        old = self.device_windows.pop(name, None)
        if old is not None:
            dispose(old)
        window = DeviceCodeWindow(self.controller, name, code, uri)
        self.device_windows[name] = window
        bring_to_front(window)

    def _prompt(self, name: str, text: str, secret: bool, answer: Any) -> None:
        answer.value = None if self._closed else ask_login(self.controller, name, text, secret)
        answer.ready.set()

    def _consent(self, question: Any) -> None:
        if self._closed:
            return
        key = consent_key(question)
        old = self.consent_dialogs.pop(key, None)
        if old is not None:
            dispose(old)
        dialog = ConsentDialog(self.controller, question)
        dialog.finished.connect(lambda _r, key=key: self._consent_done(key))
        self.consent_dialogs[key] = dialog
        bring_to_front(dialog)
        self.show_notification("remote", key, "kubetray: an SSH host asks", question.text)

    def _consent_done(self, key: str) -> None:
        if self._notified.get(key) == "remote":
            self.withdraw_notification(key)

    def show_notification(self, kind: str, name: str, title: str, text: str) -> None:
        if self._closed:  # queued by a login thread before Quit; the tray is gone
            return
        self.notifications.append((kind, title, text))
        default, buttons = NOTIFICATIONS.get(kind, ("show", ()))
        if not clipboard_from_anywhere():
            buttons = tuple((k, f"{label}…" if k == "copy" else label) for k, label in buttons)
        labels = dict(buttons)
        actions = ((DEFAULT, labels.get(default, "Open kubetray")), *buttons)

        def otherwise() -> None:  # the service is not there after all, or it failed
            if self._notified.get(name) == kind:
                del self._notified[name]
            self._show_message(kind, name, title, text, default)

        expires = EXPIRES_MS.get(kind, -1)
        if self.desktop_notifications.notify(name, title, text, actions, otherwise, expires):
            self._notified[name] = kind
            return  # the desktop's own service shows it (history, do-not-disturb, actions)
        self._show_message(kind, name, title, text, default)

    def _show_message(self, kind: str, name: str, title: str, text: str, default: str) -> None:
        """Qt's message, where the desktop has no notification service. It has no buttons:
        where the notification's would be (Open login page, Copy link) is said, and that
        depends on the mode: the tray's menu, or (no tray) the window's buttons."""
        if self._closed:
            return
        buttons = NOTIFICATIONS.get(kind, ("show", ()))[1]
        login_page = bool(buttons) and buttons[0][0] == "open"
        if self.tray is not None:
            if login_page:
                text += " (Open login page and Copy link are in kubetray's menu.)"
            self._message = (name, default)  # a click on it does what the click would do
            self.tray.showMessage(title, text, icons.state_icon(self.state))
        elif self.main_window is not None:
            if login_page:  # they act on the selected row: this identity's
                which = "" if self.main_window.select_identity(name) else f"Select {name}: "
                text += f" ({which}Open login page and Copy link are the buttons above.)"
            self.main_window.show_notice(title, text, about=name)
            self._notified[name] = kind  # taken back when moot, as a notification is
            if kind in ("login", "waiting", "browser", "remote"):  # it needs the person
                bring_to_front(self.main_window)

    def withdraw_notification(self, name: str) -> None:
        """Take the notification about ``name`` off the screen: it is answered or moot."""
        self._notified.pop(name, None)
        self.desktop_notifications.withdraw(name)
        if self.main_window is not None:
            self.main_window.withdraw_notice(name)

    def _in_window(self, name: str) -> MainWindow:
        """The main window, in front, with ``name`` selected: its questions are asked there."""
        self.show_main_window()
        assert self.main_window is not None
        self.main_window.select(name)
        return self.main_window

    def remove(self, name: str) -> None:
        """Remove asks first, as the window does (it logs out and forgets the identity)."""
        self._in_window(name).remove()

    def switch_account(self, name: str) -> None:
        """The provider is asked first whether it can offer another account (the window)."""
        self._in_window(name).switch_account(name)

    def open_login_page(self, name: str) -> None:
        """The login page in the browser the person chose (Settings, KUBETRAY_BROWSER)."""
        if not self.controller.open_login_page(name):
            self.show_link(name)  # it did not open: the link, to open by hand

    def copy_link(self, name: str) -> None:
        """The login page's address on the clipboard, where the platform lets us put it from
        here; on Wayland from a small window of ours (see clipboard_from_anywhere)."""
        link = self.controller.login_link(name)
        if not link:
            return
        if clipboard_from_anywhere():
            QGuiApplication.clipboard().setText(link)
        else:
            self.show_link(name)

    def show_link(self, name: str) -> None:
        """A small window with the login link, a Copy button and Open login page."""
        link = self.controller.login_link(name)
        if not link or self._closed:
            return
        window = self.link_windows.get(name)
        if window is None or not Shiboken.isValid(window):
            window = LinkWindow(self.controller, name, link)
            self.link_windows[name] = window
        bring_to_front(window)

    def _notification_action(self, name: str, key: str) -> None:
        if key == DEFAULT:
            key = NOTIFICATIONS.get(self._notified.get(name, ""), ("show", ()))[0]
        # Answered: off the screen. Some services close it after a click (dunst, GNOME Shell);
        # others leave that to the program (mako keeps it until it expires, by default never).
        self.withdraw_notification(name)
        self._act(name, key)

    def _act(self, name: str, key: str) -> None:
        if key == "login":
            self.controller.log_in(name)
        elif key == "open":
            self.open_login_page(name)
        elif key == "copy":
            self.copy_link(name)
        elif name in self.consent_dialogs and Shiboken.isValid(self.consent_dialogs[name]):
            bring_to_front(self.consent_dialogs[name])
        elif any(i.name == name for i in self.controller.identities()):
            self._in_window(name)
        else:
            self.show_main_window()

    def _message_clicked(self) -> None:
        """A click on Qt's own message. Qt's StatusNotifierItem reports a click on *any*
        notification this way, so only one of its own messages counts."""
        message, self._message = self._message, None
        if message is not None:
            self._act(*message)

    # -- windows ----------------------------------------------------------------------------

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        # Left click (Trigger) opens the window; the right click shows the menu by itself.
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.show_main_window()

    def show_main_window(self) -> None:
        if self._closed:
            return
        if self.main_window is None:
            self.main_window = MainWindow(self.controller, self.show_diagnostics)
            self.main_window.open_login_page_of = self.open_login_page
        self.main_window.stood_in_at = None  # the person opened it: it stays
        self.main_window.update_status(self.controller.identities(), self.controller.clock())
        bring_to_front(self.main_window)

    def show_all_identities(self) -> None:
        """The main window with its filter focused: the menu lists only the ones that matter."""
        self.show_main_window()
        if self.main_window is not None:
            self.main_window.focus_search()

    def show_diagnostics(self) -> None:
        if self.diagnostics is None:
            self.diagnostics = DiagnosticsWindow(self.controller)
        self.diagnostics.refresh()
        bring_to_front(self.diagnostics)

    def show_about(self) -> None:
        self.about = show_about(self.about)

    def add_cluster(self) -> None:
        self.add_dialog = AddClusterDialog(self.controller)
        bring_to_front(self.add_dialog)

    def show_settings(self) -> None:
        self.settings_dialog = SettingsDialog(self.controller)
        bring_to_front(self.settings_dialog)

    def shutdown(self) -> None:
        """Stop updating, withdraw our notifications, close every window (Quit, and the end of
        a test)."""
        self._closed = True
        self.timer.stop()
        if self.main_window is not None:
            self.main_window.set_standalone(False)  # closing it now must not ask
        if self.host is not None:
            self.host.stop()
        self.controller.detach()
        windows = [
            *self.device_windows.values(),
            *self.consent_dialogs.values(),
            *self.link_windows.values(),
            self.main_window,
            self.diagnostics,
            getattr(self, "add_dialog", None),
            getattr(self, "settings_dialog", None),
        ]
        for window in windows:
            if window is not None:
                dispose(window)
        self.device_windows.clear()
        self.link_windows.clear()
        self.desktop_notifications.close()
        if self.tray is not None:
            self.tray.hide()
            dispose(self.tray)
            self.tray = None
        for sub in (*(row.menu for row in self._rows.values()), *self._retired):
            dispose(sub)
        self._rows.clear()
        self._retired.clear()
        dispose(self.menu)

    def open_windows(self) -> list[str]:
        """The titles of the windows a person sees open: dialogs, the main window (unless it
        only stands in for a missing tray), the device-code, link and diagnostics windows. Not
        Qt's own top-level widgets, such as the XEmbed tray icon's (QSystemTrayIconSys) or a
        menu: a restart waits for these, and must not wait for what is always there."""
        main = self.main_window
        stand_in = main if main is not None and main.standalone else None
        ours = (QDialog, MainWindow, DeviceCodeWindow, DiagnosticsWindow)
        return [
            w.windowTitle()
            for w in QApplication.topLevelWidgets()
            if isinstance(w, ours) and w.isVisible() and w is not stand_in
        ]

    def bring_forward(self) -> None:
        """A second `kubetray` asked us to show ourselves."""
        self.show_main_window()
