"""Where kubetray keeps things: the socket's private directory, config, and logs.

Imported on the hot path, so only ``sys`` and the platform's builtin ``posix``/``nt`` are used
here. Every path that kubetray-exec and the agent must agree on is computed in this one module.
"""

import sys

SOCKET_NAME = "agent.sock"
FORWARD_ENV = "KUBETRAY_AGENT_SOCK"
"""Names a socket forwarded from a desktop's agent (``ssh -R``), like ``SSH_AUTH_SOCK``."""
FORWARD_PATH = "/tmp/kubetray-{user}.sock"
"""Where ``kubetray ssh`` forwards the agent on the remote host: one per remote user."""
LOCK_NAME = "agent.lock"
APP = "kubetray"


def getenv(name: str) -> str | None:
    """Read an environment variable without importing ``os`` (it costs a millisecond)."""
    if sys.platform == "win32":
        import os

        return os.environ.get(name)
    import posix

    value = posix.environ.get(name.encode())
    return None if value is None else value.decode("utf-8", "surrogateescape")


RUNTIME_ENV = "KUBETRAY_RUNTIME_DIR"
TIMEOUT_ENV = "KUBETRAY_EXEC_TIMEOUT"
"""Seconds kubetray-exec waits for each frame of the agent's answer (exchange.FRAME_TIMEOUT)."""
FAST_ENV = "KUBETRAY_EXEC_FAST"
"""``0``: the installed launcher never takes its fast path (it always starts Python)."""
HANDOVER_ENV = "KUBETRAY_LISTEN_FDS"
"""``SOCKET,LOCK``: what a restarting agent hands over across exec (app/restart.py)."""
HANDOVER_PID_ENV = "KUBETRAY_LISTEN_PID"
"""The pid they were handed to: a child that inherits the environment must not take them."""
RESTART_ENV = (
    "KUBETRAY_RESTARTED_FROM",
    "KUBETRAY_MEMORY_FD",
    "KUBETRAY_BUILD_FILE",
    "KUBETRAY_PIN",
)
"""Also set for (or by) a restarted agent: never a setting for kubetray-exec to pass on."""
INFRA_ENV = (
    RUNTIME_ENV,
    "KUBETRAY_CONFIG_DIR",
    "KUBETRAY_STATE_DIR",
    "KUBETRAY_AGENT_COMMAND",
    TIMEOUT_ENV,
    FORWARD_ENV,
    FAST_ENV,
    HANDOVER_ENV,
    HANDOVER_PID_ENV,
    *RESTART_ENV,
)
"""``KUBETRAY_*`` variables that say how to reach the agent: never sent to it."""
PASSED_ENV = (
    "KUBECONFIG",
    # the tools the agent runs for a caller (Azure kubelogin's azurecli/azd: az, azd) are the
    # ones its shell would run; an agent started by the desktop has another PATH
    "PATH",
    "DBUS_SESSION_BUS_ADDRESS",
    # aws-iam-authenticator's own: the cluster ID and the role when not given as -i, -r
    "KUBERNETES_AWS_AUTHENTICATOR_CLUSTER_ID",
    "DEFAULT_ROLE",
)
"""Other variables sent to the agent (besides the ``KUBETRAY_*`` settings)."""
ENV_PREFIX = "KUBETRAY_"
PASSED_ENV_PREFIXES = (
    "AAD_",  # Azure kubelogin's own (AAD_LOGIN_METHOD, AAD_SERVICE_PRINCIPAL_CLIENT_ID, ...)
    "AZURE_",  # Azure's SDKs and kubelogin (AZURE_CLIENT_ID, AZURE_TENANT_ID, ...)
    "ARM_",  # Terraform's names, which kubelogin reads with --use-azurerm-env-vars
    "ACTIONS_ID_TOKEN_REQUEST_",  # GitHub Actions' OIDC token for workload identity
    "AWS_",  # the AWS CLI and SDKs (AWS_PROFILE, AWS_REGION, AWS_CONFIG_FILE, ...)
    "CLOUDSDK_",  # gcloud (CLOUDSDK_CONFIG, CLOUDSDK_CORE_ACCOUNT, ...)
    "GOOGLE_",  # Google's libraries (GOOGLE_APPLICATION_CREDENTIALS, ...)
)
"""Variables of the cloud tools kubetray stands in for, sent to the agent so that a provider
reads them as that tool would in the caller's shell (app.providers). Some hold secrets
(AZURE_CLIENT_SECRET, AWS_SECRET_ACCESS_KEY): the agent keeps requests in memory only, and
neither logs nor records their environment. A request forwarded from an SSH host carries none
of them to the desktop's agent (app.usecases.get_credential)."""
_PREFIXES_B = tuple(p.encode() for p in (ENV_PREFIX, *PASSED_ENV_PREFIXES))
_FIRST_B = frozenset(p[:1] for p in _PREFIXES_B)
"""Their first bytes: most of an environment (PATH, HOME, LANG, XDG_*) fails this one set
lookup, so eight prefixes cost what one did."""
_PASSED_B = tuple(name.encode() for name in PASSED_ENV)


def kubetray_env() -> list[str]:
    """``KUBETRAY_*=value`` settings meant for the agent (flags given as environment), the
    caller's ``KUBECONFIG`` (the agent names identities after the kubeconfig user), its
    D-Bus session bus (an agent started without one finds the keyring there), and the cloud
    tools' variables (PASSED_ENV_PREFIXES)."""
    if sys.platform == "win32":
        import os

        prefixes = (ENV_PREFIX, *PASSED_ENV_PREFIXES)
        items = [(k, v) for k, v in os.environ.items() if k.startswith(prefixes) or k in PASSED_ENV]
    else:
        import posix

        items = [
            (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
            for k, v in posix.environ.items()
            if (k[:1] in _FIRST_B and k.startswith(_PREFIXES_B)) or k in _PASSED_B
        ]
    return [f"{k}={v}" for k, v in items if k not in INFRA_ENV]


def _home() -> str:
    home = getenv("HOME") or getenv("USERPROFILE")
    if home:
        return home
    import os

    return os.path.expanduser("~")


def forwarded_socket() -> str | None:
    """The forwarded agent socket, when ``KUBETRAY_AGENT_SOCK`` names one (it wins)."""
    return getenv(FORWARD_ENV) or None


def runtime_dir() -> str:
    """The private directory holding the agent's socket and lock (created by the agent)."""
    override = getenv(RUNTIME_ENV)
    if override:
        return override
    if sys.platform == "win32":
        return (getenv("LOCALAPPDATA") or _home()) + "\\" + APP
    if sys.platform == "darwin":
        return _home() + "/Library/Application Support/" + APP
    xdg = getenv("XDG_RUNTIME_DIR")
    if xdg:
        return xdg + "/" + APP
    import posix

    return f"/tmp/{APP}-{posix.getuid()}"


def config_dir() -> str:
    """Settings and the non-secret index of stored credentials."""
    override = getenv("KUBETRAY_CONFIG_DIR")
    if override:
        return override
    if sys.platform == "win32":
        return (getenv("APPDATA") or _home()) + "\\" + APP
    if sys.platform == "darwin":
        return _home() + "/Library/Application Support/" + APP
    return (getenv("XDG_CONFIG_HOME") or _home() + "/.config") + "/" + APP


def state_dir() -> str:
    """Logs (the agent's log when kubetray-exec started it)."""
    override = getenv("KUBETRAY_STATE_DIR")
    if override:
        return override
    if sys.platform == "win32":
        return (getenv("LOCALAPPDATA") or _home()) + "\\" + APP + "\\logs"
    if sys.platform == "darwin":
        return _home() + "/Library/Logs/" + APP
    return (getenv("XDG_STATE_HOME") or _home() + "/.local/state") + "/" + APP


def _which_variable(kind: str) -> str:
    """The variable that moves a directory of ``kind`` ("state" or "config") where it is."""
    own = "KUBETRAY_STATE_DIR" if kind == "state" else "KUBETRAY_CONFIG_DIR"
    if getenv(own) or sys.platform in ("win32", "darwin"):
        return own
    return "XDG_STATE_HOME" if kind == "state" else "XDG_CONFIG_HOME"


def unusable_dir(kind: str, path: str, e: OSError) -> str:
    """One line for a directory kubetray cannot use (``kind``: "state" or "config"): which,
    why in words, and the remedy (not the exception's class name)."""
    import errno
    import os

    variable = _which_variable(kind)
    elsewhere = f"set {variable} to a directory you can write"
    parent, blocker, existing = path, None, None
    while parent and parent != os.path.dirname(parent):
        if os.path.lexists(parent) and not os.path.isdir(parent):
            blocker = parent
        elif existing is None and os.path.isdir(parent):
            existing = parent
        parent = os.path.dirname(parent)
    if blocker is not None:
        why, fix = f"{blocker} is a file, not a directory", f"move that file away, or {elsewhere}"
    elif e.errno == errno.EROFS or _read_only(existing or "/"):
        why, fix = "it is on a read-only file system", elsewhere
    elif e.errno in (errno.EACCES, errno.EPERM) and existing == path:
        why, fix = "permission denied", f"make it yours and writable (chmod u+rwx), or {elsewhere}"
    elif e.errno in (errno.EACCES, errno.EPERM):
        why, fix = f"it cannot be made in {existing or '/'}", elsewhere
    else:
        why, fix = e.strerror or str(e), elsewhere
    return f"kubetray cannot use {path} as its {kind} directory ({why}); {fix}"


def _read_only(path: str) -> bool:
    """Is ``path`` on a file system mounted read-only (or one that takes no files, /sys)?"""
    if sys.platform == "win32":
        return False
    import os

    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return bool(st.f_flag & os.ST_RDONLY) or path == "/sys" or path.startswith("/sys/")
