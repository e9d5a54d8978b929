"""The C launcher built for tests: the installed kubetray-exec's code under sanitizers.

``build(directory)`` compiles packaging/launcher/kubetray_exec.c + fast_path.c with ASan and
UBSan (every finding fatal) against this machine's libpython, in the bundle's layout, made of
symlinks instead of PyInstaller's copies::

    DIR/kubetray-exec                         the launcher under test
    DIR/kubetray                              `python -m app` from this tree (the agent the
                                              fallback Python starts: it looks beside itself)
    DIR/_internal/libpython3.11.so.1.0        -> the system's
    DIR/_internal/kubetray-exec-lib/          exec_helper -> this tree's; the stdlib's entries
    DIR/_internal/python3.11/lib-dynload      -> the system's

``with_python=False`` leaves libpython out: such a launcher can only answer by its fast path
(the fallback says "cannot load the bundled Python library"). ``fuzzer(directory)`` builds
packaging/launcher/fuzz_answer.c with libFuzzer; ``python -m tests.launcher fuzz [SECONDS]``
runs it (make fuzz).
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER_DIR = ROOT / "packaging" / "launcher"
CORPUS = LAUNCHER_DIR / "fuzz_corpus"
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
PYLIB = f"libpython{VERSION}.so.1.0"
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]
WARNINGS = ["-Wall", "-Wextra", "-Werror"]
SANITIZER_ENV = {
    # CPython is not built for ASan: it keeps memory to the end on purpose (interned strings,
    # caches) and the helper leaves by os._exit, so leak reports would only be about Python.
    # The fast path returns from main() and frees everything: its leaks are checked (and
    # LSan runs at exit() only, which the fallback never reaches).
    "ASAN_OPTIONS": "abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
}
"""What a sanitizer build runs with; its findings exit 86 / 87 and print 'Sanitizer'."""


def packaging_build() -> ModuleType:
    """packaging/build.py as a module (`packaging` is also a PyPI package's name)."""
    spec = importlib.util.spec_from_file_location("kubetray_build", ROOT / "packaging/build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _system_libpython() -> Path:
    return Path(str(sysconfig.get_config_var("LIBDIR"))) / PYLIB


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def build(directory: Path, *, with_python: bool = True) -> Path:
    """Compile the sanitizer launcher into a bundle layout at ``directory``; return it."""
    build_py = packaging_build()
    internal = directory / "_internal"
    lib = internal / "kubetray-exec-lib"
    lib.mkdir(parents=True)
    include = build_py.protocol_header(directory / "include").parent
    if with_python:
        (internal / PYLIB).symlink_to(_system_libpython())
        for entry in _stdlib().iterdir():
            if entry.name not in ("site-packages", "dist-packages", "lib-dynload"):
                (lib / entry.name).symlink_to(entry)
        (lib / "exec_helper").symlink_to(ROOT / "exec_helper")
        (internal / f"python{VERSION}").mkdir()
        (internal / f"python{VERSION}" / "lib-dynload").symlink_to(_stdlib() / "lib-dynload")
    # The agent the fallback starts: `kubetray agent`, found beside kubetray-exec.
    agent = directory / "kubetray"
    agent.write_text(
        f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m app "$@"\n', encoding="utf-8"
    )
    agent.chmod(0o755)
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    cmd = [
        cc,
        *WARNINGS,
        *SANITIZE,
        "-O1",
        f"-I{sysconfig.get_paths()['include']}",
        f"-I{include}",
        f'-DKT_PYLIB="{PYLIB}"',
        '-DKT_INTERNAL="_internal"',
        f'-DKT_DYNLOAD="python{VERSION}/lib-dynload"',
        "-DKT_PRELOAD=",
        str(LAUNCHER_DIR / "kubetray_exec.c"),
        str(LAUNCHER_DIR / "fast_path.c"),
        "-o",
        str(directory / "kubetray-exec"),
        "-ldl",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return directory / "kubetray-exec"


def fuzzer(directory: Path) -> Path:
    """Compile the libFuzzer target for kt_parse_answer (clang)."""
    include = packaging_build().protocol_header(directory / "include").parent
    out = directory / "fuzz_answer"
    cmd = [
        "clang",
        *WARNINGS,
        "-fsanitize=fuzzer,address,undefined",
        "-fno-sanitize-recover=all",
        "-g",
        "-O1",
        f"-I{include}",
        f"-I{LAUNCHER_DIR}",
        str(LAUNCHER_DIR / "fuzz_answer.c"),
        str(LAUNCHER_DIR / "fast_path.c"),
        "-o",
        str(out),
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def fuzz(directory: Path, seconds: int) -> subprocess.CompletedProcess[str]:
    """Run the fuzzer for ``seconds`` on a copy of the seed corpus (the seeds stay as
    committed); its log is on stderr."""
    binary = fuzzer(directory)
    corpus = directory / "corpus"
    shutil.copytree(CORPUS, corpus)
    return subprocess.run(
        [
            str(binary),
            f"-max_total_time={seconds}",
            "-max_len=4096",
            "-timeout=10",
            "-print_final_stats=1",
            f"-artifact_prefix={directory}/",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        env={**os.environ, **SANITIZER_ENV},
        check=False,
    )


def main(argv: list[str]) -> int:
    """``fuzz [SECONDS]``: fuzz kt_parse_answer (make fuzz); crashes are kept in build/fuzz."""
    if argv[:1] != ["fuzz"]:
        print("usage: python -m tests.launcher fuzz [SECONDS]", file=sys.stderr)
        return 2
    seconds = int(argv[1]) if len(argv) > 1 else 60
    directory = ROOT / "build" / "fuzz"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    done = fuzz(directory, seconds)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
