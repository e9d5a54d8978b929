"""The tray icon and its menu, or the status window where there is no tray. Thin: it shows
what the controller reports and forwards clicks."""

from functools import partial
from typing import Any
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, QTimer, QUrl
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox, QSystemTrayIcon, QWidget
from shiboken6 import Shiboken

from app.model import OIDC, IdentityStatus, State
from app.ui import icons
from app.ui.controller import TrayController
from app.ui.dialogs import AddClusterDialog, ConsentDialog, SettingsDialog, ask_login
from app.ui.notify import DesktopNotifications
from app.ui.text import about_text, time_left, who
from app.ui.views import DeviceCodeWindow, DiagnosticsWindow, StatusWindow, bring_to_front
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


NOTIFICATION_ACTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "login": (("login", "Log in"),),
    "expiring": (("login", "Log in"),),
    "failure": (("login", "Log in"),),
    "refresh": (("login", "Log in"),),
    "browser": (("open", "Open login page"), ("copy", "Copy link")),
    "waiting": (("open", "Open login page"), ("copy", "Copy link")),
}
"""The buttons of each kind of notification, by key (see _notification_action)."""

MENU_TEXT = 60
"""The longest text in the menu: a login URL once made it as wide as the screen."""


def menu_text(text: str, limit: int = MENU_TEXT) -> str:
    """``text`` for a QAction: one line, at most ``limit`` characters (the middle elided), and
    ``&`` doubled so that Qt shows it instead of making the next letter a shortcut."""
    text = " ".join(text.split())
    if len(text) > limit:
        head = (limit - 1) // 2
        text = text[:head] + "…" + text[len(text) - (limit - 1 - head) :]
    return text.replace("&", "&&")


def open_link(url: str) -> None:
    """Open a login page with the desktop's handler (the person asked for it)."""
    QDesktopServices.openUrl(QUrl(url))


def copy_link(url: str) -> None:
    """Put a login link on the clipboard, to open it in any browser."""
    QApplication.clipboard().setText(url)


class TrayApp(QObject):
    """Everything the user sees of kubetray."""

    def __init__(self, controller: TrayController, tray: bool | None = None) -> None:
        super().__init__()
        self.controller = controller
        use_tray = QSystemTrayIcon.isSystemTrayAvailable() if tray is None else tray
        self.menu = QMenu()
        self.tray: QSystemTrayIcon | None = None
        self.status_window: StatusWindow | None = None
        self.main_window: MainWindow | None = None
        self.state = icons.overall_state(controller.identities())
        if use_tray:
            # The icon before show(): Qt warns "No Icon set" otherwise.
            self.tray = QSystemTrayIcon(icons.state_icon(self.state))
            self.tray.setContextMenu(self.menu)
            self.tray.messageClicked.connect(self._notification_clicked)
            self.tray.activated.connect(self._activated)
            self.tray.show()
        else:
            self.status_window = StatusWindow(controller)
            if controller.store_notice:
                self.status_window.show_notice("No OS keyring", controller.store_notice)
            self.status_window.show()
        self.device_windows: dict[str, DeviceCodeWindow] = {}
        self.consent_dialogs: dict[str, ConsentDialog] = {}
        self.diagnostics: DiagnosticsWindow | None = None
        self.about: QMessageBox | None = None
        self.notifications: list[tuple[str, str, str]] = []
        self.desktop_notifications = DesktopNotifications()
        self.desktop_notifications.action.connect(self._notification_action)
        self._progress: dict[str, str] = {}
        self._signature: object = None
        self._info: dict[str, QAction] = {}
        """Each identity's line in the menu."""
        self.identity_menus: dict[str, QMenu] = {}
        self._submenus: list[QMenu] = []
        self._old_submenus: list[QMenu] = []
        self._clicked_login: str | None = None
        self._closed = False
        controller.changed.connect(self.refresh)
        controller.started_login.connect(lambda _n: self.refresh())
        controller.finished_login.connect(self._finished)
        controller.progress.connect(self._on_progress)
        controller.device_code.connect(self.show_device_code)
        controller.prompt.connect(self._prompt)
        controller.consent_asked.connect(self._consent)
        controller.notify.connect(self.show_notification)
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.tick)
        self.timer.start(1000)
        self.refresh()

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
        if self.tray is not None:
            if state != self.state or self.tray.icon().isNull():
                self.tray.setIcon(icons.state_icon(state))
            self.tray.setToolTip(self._tooltip(identities, now))
        self.state = state
        if self.status_window is not None:
            self.status_window.update_status(identities, now)
        if self.main_window is not None and self.main_window.isVisible():
            self.main_window.update_status(identities, now)
        signature = tuple(
            (
                i.name,
                i.kind,
                i.state,
                bool(self.controller.login_link(i.name)),
                i.clusters,
                i.contexts,
            )
            for i in identities
        )
        if signature != self._signature:
            self._signature = signature
            self._build_menu(identities)
        for ident in identities:
            action = self._info.get(ident.name)
            line = self._line(ident, now)
            if action is not None and action.text() != line:
                action.setText(line)

    def _tooltip(self, identities: list[IdentityStatus], now: Any) -> str:
        if not identities:
            return "kubetray: nothing set up yet"
        return "kubetray\n" + "\n".join(
            f"{i.name}: {i.state} {time_left(i.expires, now)}".rstrip() for i in identities
        )

    def _line(self, ident: IdentityStatus, now: Any) -> str:
        """The identity's one line in the menu: its name and a short state."""
        return menu_text(f"{ident.name}  ·  {self._short_state(ident, now)}")

    def _short_state(self, ident: IdentityStatus, now: Any) -> str:
        if ident.state is State.LOGGING_IN:
            return self.controller.login_stage(ident.name)
        left = time_left(ident.expires, now)
        if ident.state in (State.READY, State.EXPIRING) and left:
            return f"{ident.state}  ·  {left}"
        return str(ident.state)

    def _build_menu(self, identities: list[IdentityStatus]) -> None:
        menu, c = self.menu, self.controller
        menu.clear()
        # Submenus of the last build go at the next one: one of their actions may be running.
        for old in self._old_submenus:
            dispose(old)
        self._old_submenus = self._submenus
        self._submenus = []
        self._info.clear()
        self.identity_menus.clear()
        now = c.clock()
        menu.addAction("Open kubetray", self.show_main_window)
        menu.addSeparator()
        if not identities:
            menu.addAction("No identities yet: add a cluster, or run kubectl").setEnabled(False)
        for ident in identities:
            sub = QMenu(self._line(ident, now))
            self._submenus.append(sub)
            self.identity_menus[ident.name] = sub
            self._fill_identity_menu(sub, ident, now)
            self._info[ident.name] = menu.addMenu(sub)
        if c.store_notice:
            menu.addSeparator()
            notice = c.store_notice[:1].upper() + c.store_notice[1:]
            entry = menu.addAction(menu_text(notice))
            entry.setEnabled(False)
            entry.setToolTip(notice)
        menu.addSeparator()
        if len(c.logins.stale(now)) > 1:
            menu.addAction("Log in to all", c.log_in_to_all)
        menu.addAction("Add cluster…", self.add_cluster)
        menu.addAction("Settings", self.show_settings)
        menu.addAction("Diagnostics", self.show_diagnostics)
        menu.addAction("About kubetray", self.show_about)
        menu.addSeparator()
        menu.addAction("Quit kubetray", QApplication.quit)

    def _fill_identity_menu(self, sub: QMenu, ident: IdentityStatus, now: Any) -> None:
        """One identity's actions; its first line says who it is (disabled, for reading)."""
        name, c = ident.name, self.controller
        issuer = urlsplit(ident.issuer).netloc if ident.issuer else ""
        detail = [who(ident) or issuer or ident.kind]
        left = time_left(ident.expires, now)
        if left:
            detail.append(left)
        sub.addAction(menu_text("  ·  ".join(detail))).setEnabled(False)
        sub.addSeparator()
        if ident.kind == OIDC:
            if ident.state is State.LOGGING_IN:
                link = c.login_link(name)
                if link:
                    sub.addAction("Open login page", partial(open_link, link))
                    sub.addAction("Copy link", partial(copy_link, link))
                sub.addAction("Cancel login", partial(c.cancel, name))
            elif ident.state in (State.NEEDS_LOGIN, State.EXPIRED, State.ERROR):
                sub.addAction("Log in", partial(c.log_in, name))
            else:
                sub.addAction("Log out", partial(c.log_out, name))
                sub.addAction("Switch account…", partial(self._switch_account, name))
        sub.addSeparator()
        sub.addAction("Remove identity…", partial(self._remove, name))

    def _actions(self, menu: QMenu | None = None) -> list[QAction]:
        """Every action of the menu, each identity's submenu right after its line."""
        out: list[QAction] = []
        for action in (menu or self.menu).actions():
            out.append(action)
            sub = action.menu()
            if isinstance(sub, QMenu):
                out.extend(self._actions(sub))
        return out

    def action_texts(self, deep: bool = True) -> list[str]:
        """The menu as it reads (``&&`` shows as ``&``), submenus too unless not ``deep``; for
        tests and screen readers."""
        actions = self._actions() if deep else self.menu.actions()
        return [a.text().replace("&&", "&") for a in actions if a.text()]

    def trigger(self, text: str, identity: str | None = None) -> None:
        """Click the menu entry ``text`` (in ``identity``'s submenu, if given)."""
        scope = self.menu
        if identity is not None:
            scope = self.identity_menus[identity]
        for action in self._actions(scope):
            if action.text() == text and action.isEnabled():
                action.trigger()
                return
        raise KeyError(text)

    # -- logins in the desktop --------------------------------------------------------------

    def _on_progress(self, name: str, text: str) -> None:
        self._progress[name] = text
        self.refresh()

    def _finished(self, name: str, _error: str) -> None:
        self._progress.pop(name, None)
        window = self.device_windows.pop(name, None)
        if window is not None:
            dispose(window)
        self.refresh()

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
        old = self.consent_dialogs.pop(question.host, None)
        if old is not None:
            dispose(old)
        dialog = ConsentDialog(self.controller, question)
        self.consent_dialogs[question.host] = dialog
        bring_to_front(dialog)
        self.show_notification("remote", question.host, "kubetray: an SSH host asks", question.text)

    def show_notification(self, kind: str, name: str, title: str, text: str) -> None:
        if self._closed:  # queued by a login thread before Quit; the tray is gone
            return
        self.notifications.append((kind, title, text))
        # A click on Qt's message (no buttons there) starts the login it asks for.
        self._clicked_login = (
            name if ("login", "Log in") in NOTIFICATION_ACTIONS.get(kind, ()) else None
        )
        actions = NOTIFICATION_ACTIONS.get(kind, ())
        if self.desktop_notifications.notify(name, title, text, actions):
            return  # the desktop's own service shows it (history, do-not-disturb, actions)
        if actions and actions[0][0] == "open":  # Qt's message has no buttons: say where
            text = f"{text} (Open login page and Copy link are in kubetray's menu.)"
        if self.tray is not None:
            self.tray.showMessage(title, text, icons.state_icon(self.state))
        elif self.status_window is not None:
            self.status_window.show_notice(title, text)

    def _in_window(self, name: str) -> MainWindow:
        """The main window, in front, with ``name`` selected: its questions are asked there."""
        self.show_main_window()
        assert self.main_window is not None
        self.main_window.select(name)
        return self.main_window

    def _remove(self, name: str) -> None:
        """Remove asks first, as the window does (it logs out and forgets the identity)."""
        self._in_window(name).remove()

    def _switch_account(self, name: str) -> None:
        """The provider is asked first whether it can offer another account (the window)."""
        self._in_window(name).switch_account(name)

    def _notification_action(self, name: str, key: str) -> None:
        if key == "login":
            self.controller.log_in(name)
        elif key in ("open", "copy"):
            link = self.controller.login_link(name)
            if link:
                (open_link if key == "open" else copy_link)(link)
        elif key == "default":  # a click on the notification itself
            self.show_main_window()

    def _notification_clicked(self) -> None:
        if self._clicked_login:
            self.controller.log_in(self._clicked_login)

    # -- windows ----------------------------------------------------------------------------

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        # Left click (Trigger) opens the window; the right click shows the menu by itself.
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.show_main_window()

    def show_main_window(self) -> None:
        if self.main_window is None:
            self.main_window = MainWindow(self.controller, self.show_diagnostics)
        self.main_window.update_status(self.controller.identities(), self.controller.clock())
        bring_to_front(self.main_window)

    def show_diagnostics(self) -> None:
        if self.diagnostics is None:
            self.diagnostics = DiagnosticsWindow(self.controller)
        self.diagnostics.refresh()
        bring_to_front(self.diagnostics)

    def show_about(self) -> None:
        """Which kubetray this is: its version and build (what an upgrade changes)."""
        if self.about is None:
            self.about = QMessageBox(QMessageBox.Icon.Information, "About kubetray", about_text())
            self.about.setModal(False)
        bring_to_front(self.about)

    def add_cluster(self) -> None:
        self.add_dialog = AddClusterDialog(self.controller)
        bring_to_front(self.add_dialog)

    def show_settings(self) -> None:
        self.settings_dialog = SettingsDialog(self.controller)
        bring_to_front(self.settings_dialog)

    def shutdown(self) -> None:
        """Stop updating and close every window (Quit, and the end of a test)."""
        self._closed = True
        self.timer.stop()
        self.controller.detach()
        windows = [
            *self.device_windows.values(),
            *self.consent_dialogs.values(),
            self.main_window,
            self.diagnostics,
            self.about,
            self.status_window,
            getattr(self, "add_dialog", None),
            getattr(self, "settings_dialog", None),
        ]
        for window in windows:
            if window is not None:
                dispose(window)
        self.device_windows.clear()
        self.desktop_notifications.close()
        if self.tray is not None:
            self.tray.hide()
            dispose(self.tray)
        for sub in (*self._submenus, *self._old_submenus):
            dispose(sub)
        self._submenus.clear()
        self._old_submenus.clear()
        dispose(self.menu)

    def bring_forward(self) -> None:
        """A second `kubetray` asked us to show ourselves."""
        if self.status_window is not None:
            bring_to_front(self.status_window)
        else:
            self.show_main_window()
