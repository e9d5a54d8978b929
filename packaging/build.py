"""Build the bundle (both programs) for this OS: python packaging/build.py.

PyInstaller builds the app and collects the helper's modules (kubetray.spec); then the C
launcher that is the installed kubetray-exec (launcher/kubetray_exec.c) is compiled against
this Python's headers and put beside kubetray. Prints where the bundle is and its size. The
per-OS scripts (linux/build.sh, macos/build.sh, windows/build.ps1) call this first, then wrap
the bundle in an installer. Needs a C compiler (cc / gcc / clang; MSVC's cl on Windows) and
the Python headers (Debian: python3-dev).

The version comes from git (setuptools-scm, configured in pyproject.toml), computed afresh for
every build: it goes into exec_helper/_version.py and, with a build id new for every build, into
build/kubetray-build.json, which the bundle carries (exec_helper/version.py reads it; a running
kubetray compares it with its own to notice an upgrade). ``python packaging/build.py version
[--debian]`` prints a bundle's version (the packaging scripts name their packages with it).
"""

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "build" / "dist"


BUILD_FILE = ROOT / "build" / "kubetray-build.json"
"""Written before PyInstaller runs; kubetray.spec puts it beside the bundle's libraries."""


def stamp() -> dict[str, str]:
    """Git's version now (setuptools-scm writes exec_helper/_version.py too) and a new build id,
    into BUILD_FILE."""
    # setuptools-scm's command line reads pyproject.toml's settings (fallback_version...) and
    # writes exec_helper/_version.py; a dev dependency: only building needs it.
    version = subprocess.run(
        [sys.executable, "-m", "setuptools_scm", "--force-write-version-files"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    build = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)
    doc = {"version": version, "build": build}
    BUILD_FILE.parent.mkdir(parents=True, exist_ok=True)
    BUILD_FILE.write_text(json.dumps(doc) + "\n")  # flat: exec_helper.version reads it sans json
    return doc


def bundle_version(bundle: Path) -> str:
    """The version a built bundle carries (its build file)."""
    found = [p for p in bundle.rglob("kubetray-build.json") if p.is_file()]
    if not found:
        raise SystemExit(f"error: {bundle} has no kubetray-build.json (build it with build.py)")
    return str(json.loads(found[0].read_text())["version"])


def debian_version(version: str) -> str:
    """A PEP 440 version as dpkg orders it: pre-releases and .devN sort before the release
    (``~``), so 0.2.0~rc1 and 0.2.1~dev4+g1a2b3c4 upgrade and downgrade as pip orders them."""
    public, plus, local = version.partition("+")
    v = re.sub(r"\.?(dev|a|b|rc)(\d+)", r"~\1\2", public) + plus + local
    return re.sub(r"[^A-Za-z0-9.+~-]", "-", v)


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())


LAUNCHER = ROOT / "packaging" / "launcher" / "kubetray_exec.c"
FAST_PATH = ROOT / "packaging" / "launcher" / "fast_path.c"
PROTOCOL_HEADER = "kt_protocol.h"


def _c_string(text: str) -> str:
    """``text`` as a C string literal (ASCII; anything else as octal escapes)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F and ch != "?":  # "?" could start a trigraph
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def protocol_header(directory: Path) -> Path:
    """Write kt_protocol.h into ``directory``: the wire constants fast_path.c needs, taken from
    exec_helper so that the C side never restates them by hand (a test compiles a program
    that prints them back)."""
    sys.path.insert(0, str(ROOT))
    try:
        from exec_helper import __main__ as helper
        from exec_helper import paths, protocol
    finally:
        sys.path.remove(str(ROOT))
    strings = {
        "KT_OP_HELLO": protocol.HELLO,
        "KT_OP_CACHED_CREDENTIAL": protocol.CACHED_CREDENTIAL,
        "KT_TYPE_HELLO": protocol.HELLO,
        "KT_TYPE_RESULT": protocol.RESULT,
        "KT_FIELD_ANSWERED": protocol.ANSWERED,
        "KT_NO_EXEC_INFO": protocol.NO_EXEC_INFO,
        "KT_SOCKET_NAME": paths.SOCKET_NAME,
        "KT_APP": paths.APP,
        "KT_ENV_PREFIX": paths.ENV_PREFIX,
        "KT_FORWARD_ENV": paths.FORWARD_ENV,
        "KT_RUNTIME_ENV": paths.RUNTIME_ENV,
        "KT_TIMEOUT_ENV": paths.TIMEOUT_ENV,
        "KT_FAST_ENV": paths.FAST_ENV,
        "KT_EXEC_INFO_ENV": helper.EXEC_INFO,
        "KT_KUBELET_MODE": helper.KUBELET_MODE,
    }
    lists = {
        "KT_INFRA_ENV": paths.INFRA_ENV,
        "KT_PASSED_ENV": paths.PASSED_ENV,
        "KT_PASSED_PREFIXES": paths.PASSED_ENV_PREFIXES,
        "KT_HELP_ARGS": helper.HELP_ARGS,
    }
    lines = [
        "/* Generated by packaging/build.py from exec_helper (protocol, paths,",
        " * __main__): do not edit. */",
        "#ifndef KT_PROTOCOL_H",
        "#define KT_PROTOCOL_H",
        f"#define KT_PROTOCOL_VERSION {protocol.PROTOCOL_VERSION}",
        f"#define KT_HEADER_SIZE {protocol.HEADER_SIZE}",
        f"#define KT_MAX_FRAME {protocol.MAX_FRAME}u",
        f"#define KT_CACHED_TIMEOUT {float(protocol.CACHED_TIMEOUT)!r}",
    ]
    # The frames' vocabulary (exchange.py reads these keys) and the request's fields.
    for key in ("op", "type", "version", protocol.KUBETRAY, "exit", "stdout", "stderr"):
        strings[f"KT_KEY_{key.upper()}"] = key
    for key in protocol.REQUEST_FIELDS:
        strings[f"KT_KEY_{key.upper()}"] = key
    lines += [f"#define {name} {_c_string(value)}" for name, value in strings.items()]
    # Lists: initializers ending in NULL, e.g. static const char *const infra[] = {KT_INFRA_ENV};
    for name, values in lists.items():
        lines.append(f"#define {name} {', '.join(_c_string(v) for v in values)}, NULL")
    lines.append("#endif")
    path = directory / PROTOCOL_HEADER
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _needed(lib: Path) -> list[str]:
    """The ELF libraries ``lib`` links (DT_NEEDED), [] when objdump is missing."""
    try:
        dump = subprocess.run(
            ["objdump", "-p", str(lib)], check=False, capture_output=True, text=True
        )
    except FileNotFoundError:
        return []
    return [line.split()[1] for line in dump.stdout.splitlines() if line.split()[:1] == ["NEEDED"]]


def _static_libpython() -> Path | None:
    """The building interpreter's static libpython (Debian's python3.X-dev), Linux only.

    Linked into the launcher it spares every kubectl command the dynamic loader's work on
    libpython.so (relocations of a 6 MB library); the extension modules find the Py* symbols in
    the program (--export-dynamic), as they do in /usr/bin/python3. KUBETRAY_LAUNCHER_DYNAMIC=1
    keeps the dlopen build.
    """
    if sys.platform != "linux" or os.environ.get("KUBETRAY_LAUNCHER_DYNAMIC") == "1":
        return None
    libpl, library = sysconfig.get_config_var("LIBPL"), sysconfig.get_config_var("LIBRARY")
    if not (libpl and library and str(library).endswith(".a")):
        return None
    archive = Path(libpl) / str(library)
    return archive if archive.exists() else None


STATIC_TOO = ("z", "expat")
"""Libraries the static libpython needs that are linked in as archives where the system has
them (zlib1g-dev, libexpat1-dev): two shared objects fewer for the loader to map on every
kubectl command (≈ 0.4 ms of CPU on the fast path, measured), and no dependence on the
system's copies."""


def _static_libs(cc: str) -> list[str]:
    """What the static libpython links against (zlib, expat, libm, ...)."""
    words = " ".join(
        str(sysconfig.get_config_var(v) or "") for v in ("MODLIBS", "LIBS", "SYSLIBS")
    ).split()
    out = []
    for word in dict.fromkeys(w for w in words if w.startswith("-l")):
        name = word[2:]
        if name in STATIC_TOO:
            found = subprocess.run(
                [cc, f"-print-file-name=lib{name}.a"], capture_output=True, text=True, check=False
            ).stdout.strip()
            if os.path.isabs(found) and os.path.exists(found):
                out.append(f"-l:lib{name}.a")
                continue
        out.append(word)
    return out


def launcher(bundle: Path) -> Path:
    """Compile the kubetray-exec launcher into the bundle; return its path."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    include = sysconfig.get_paths()["include"]
    if sys.platform == "win32":
        internal, exe = bundle / "_internal", bundle / "kubetray-exec.exe"
        pylib = f"python{sys.version_info.major}{sys.version_info.minor}.dll"
        dynload = "."  # PyInstaller puts .pyd files in _internal itself
        defines = [f'/DKT_PYLIB="{pylib}"', f'/DKT_DYNLOAD="{dynload}"']
        cmd = ["cl", "/nologo", "/O2", "/W3", f"/I{include}", *defines, str(LAUNCHER)]
        obj = bundle.parent / "kubetray_exec.obj"
        cmd += [f"/Fe{exe}", f"/Fo{obj}", "/link", "/SUBSYSTEM:CONSOLE"]
    else:
        if sys.platform == "darwin":  # inside kubetray.app: Contents/MacOS and Contents/Frameworks
            macos = bundle.parent / "kubetray.app" / "Contents" / "MacOS"
            internal, exe = macos.parent / "Frameworks", macos / "kubetray-exec"
            rel = "../Frameworks"
            names = ("Python", f"libpython{version}.dylib")
            pylib = next(n for n in names if (internal / n).exists())
        else:
            internal, exe, rel = bundle / "_internal", bundle / "kubetray-exec", "_internal"
            pylib = next(p.name for p in internal.glob(f"libpython{version}.so*"))
        # libpython's own libraries from the bundle (libz, libexpat...), loaded first so that the
        # bundle never depends on the system having them, as PyInstaller's LD_LIBRARY_PATH did.
        preload = [n for n in _needed(internal / pylib) if (internal / n).exists()]
        defines = [
            f'-DKT_PYLIB="{pylib}"',
            f'-DKT_INTERNAL="{rel}"',
            f'-DKT_DYNLOAD="python{version}/lib-dynload"',
            "-DKT_PRELOAD=" + "".join(f'"{n}",' for n in preload),
        ]
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "clang"
        generated = protocol_header(ROOT / "build" / "launcher").parent
        cmd = [cc, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include}", f"-I{generated}"]
        cmd += [*defines, str(LAUNCHER), str(FAST_PATH)]
        cmd += ["-o", str(exe)] + (["-ldl", "-s"] if sys.platform == "linux" else [])
        static = _static_libpython()
        if static:  # as /usr/bin/python3 is built: ~1 ms less than loading libpython.so
            cmd.remove("-ldl")  # it goes after the archive
            cmd += ["-DKT_STATIC", "-no-pie", "-Wl,--export-dynamic", "-Wl,--as-needed"]
            cmd += [str(static), *_static_libs(cc)]
    subprocess.run(cmd, check=True, cwd=bundle.parent)
    return exe


def main(argv: list[str]) -> int:
    if argv[:1] == ["version"]:  # version BUNDLE [--debian]
        found = bundle_version(Path(argv[1]))
        print(debian_version(found) if "--debian" in argv else found)
        return 0
    built = stamp()
    shutil.rmtree(DIST / "kubetray", ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level=WARN",
            "--distpath",
            str(DIST),
            "--workpath",
            str(ROOT / "build" / "pyinstaller"),
            str(ROOT / "packaging" / "kubetray.spec"),
        ],
        check=True,
        cwd=ROOT,
    )
    bundle = DIST / "kubetray"
    print(f"launcher: {launcher(bundle)}")
    print(f"bundle: {bundle} ({size(bundle) / 1e6:.1f} MB), kubetray {built['version']}")
    print(f"build: {built['build']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
