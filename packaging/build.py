"""Build the bundle (both programs) for this OS: python packaging/build.py.

PyInstaller builds the app and collects the helper's modules (kubetray.spec); then the C
launcher that is the installed kubetray-exec (launcher/kubetray_exec.c) is compiled against
this Python's headers and put beside kubetray. Prints where the bundle is and its size. The
per-OS scripts (linux/build.sh, macos/build.sh, windows/build.ps1) call this first, then wrap
the bundle in an installer. Needs a C compiler (cc / gcc / clang; MSVC's cl on Windows) and
the Python headers (Debian: python3-dev).
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "build" / "dist"


def version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())


LAUNCHER = ROOT / "packaging" / "launcher" / "kubetray_exec.c"


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


def _static_libs() -> list[str]:
    """What the static libpython links against (zlib, expat, libm, ...)."""
    words = " ".join(
        str(sysconfig.get_config_var(v) or "") for v in ("MODLIBS", "LIBS", "SYSLIBS")
    ).split()
    return list(dict.fromkeys(w for w in words if w.startswith("-l")))


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
        cmd = [cc, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include}", *defines, str(LAUNCHER)]
        cmd += ["-o", str(exe)] + (["-ldl", "-s"] if sys.platform == "linux" else [])
        static = _static_libpython()
        if static:  # as /usr/bin/python3 is built: ~1 ms less than loading libpython.so
            cmd.remove("-ldl")  # it goes after the archive
            cmd += ["-DKT_STATIC", "-no-pie", "-Wl,--export-dynamic", "-Wl,--as-needed"]
            cmd += [str(static), *_static_libs()]
    subprocess.run(cmd, check=True, cwd=bundle.parent)
    return exe


def main() -> int:
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
    print(f"bundle: {bundle} ({size(bundle) / 1e6:.1f} MB), kubetray {version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
