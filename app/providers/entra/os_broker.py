"""The operating system's sign-in broker for Entra logins: WAM on Windows 10+, the Company
Portal's broker on Apple Silicon Macs. UNRUN: written from MSAL's documentation
(``PublicClientApplication``'s ``enable_broker_on_windows``/``_mac``); CI is Linux.

Why it matters: Conditional Access policies that require a "compliant" or "managed" device
(AADSTS530003) pass only when the sign-in comes through the broker, which proves the device;
a browser login cannot. MSAL reaches the broker through ``pymsalruntime`` (``msal[broker]``,
installed on Windows and macOS only), and falls back to the browser by itself when the broker
cannot start (an Intel Mac, no Company Portal). Linux's broker (Intune's identity broker) is
left off: few desktops have it and the browser login works there.

The client app must have the broker's redirect URI registered
(``ms-appx-web://Microsoft.AAD.BrokerPlugin/<client id>`` on Windows,
``msauth.com.msauth.unsignedapp://auth`` on macOS). Whether the AKS client
(80faf920-1908-4b52-b5ef-a8e7bedfc67a) has them is not known here: ``KUBETRAY_ENTRA_BROKER=0``
in the caller's environment turns the broker off for a person whose broker login fails so.
"""

import importlib.util
import sys
from collections.abc import Mapping
from typing import Any

ENV = "KUBETRAY_ENTRA_BROKER"


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the caller's KUBETRAY_ENTRA_BROKER leaves the broker on (the default)."""
    return env.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def enabled(wanted: bool = True) -> bool:
    """Whether Entra logins go through the OS broker here (Windows or macOS, the broker's
    runtime installed, and ``wanted``)."""
    if not wanted:
        return False
    if sys.platform not in ("win32", "darwin"):
        return False
    return importlib.util.find_spec("pymsalruntime") is not None


def application_options() -> dict[str, Any]:
    """PublicClientApplication's keyword arguments that turn the broker on."""
    return {"enable_broker_on_windows": True, "enable_broker_on_mac": True}


def window_handle(app: Any) -> Any:
    """The window a broker prompt belongs to: the agent has none of its own, so MSAL's
    console value (the broker then centres its own window)."""
    return app.CONSOLE_WINDOW_HANDLE
