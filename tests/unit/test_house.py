"""House rules: imports flow app → exec_helper only; the helper's hot path loads only builtins."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.peers import ROOT

HOT_PATH_ALLOWED = {
    "exec_helper",
    "exec_helper.__main__",
    "exec_helper.exchange",
    "exec_helper.paths",
    "exec_helper.protocol",
    "exec_helper.errors",
    "exec_helper.transport",
    "exec_helper.transport_unix",
    "_socket",
    "_json",
    "posix",
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_exec_helper_is_standard_library_only() -> None:
    for path in (ROOT / "exec_helper").rglob("*.py"):
        for name in imports(path):
            top = name.split(".")[0]
            assert top == "exec_helper" or top in sys.stdlib_module_names, (
                f"{path.name} imports {name}"
            )


def test_only_the_ui_imports_qt() -> None:
    for path in (ROOT / "app").rglob("*.py"):
        if "ui" in path.relative_to(ROOT / "app").parts:
            continue
        assert not any(n.startswith("PySide6") for n in imports(path)), path


UI_MAY_IMPORT = (
    "app.ui",
    "app.model",
    "app.errors",
    "app.settings",
    "app.autostart",
    "app.installation",
    "app.oidc.settings",  # Metadata: a noun the probe reports
)
"""What views import; only the controller (and app.py, which composes) reach the core."""


def test_the_ui_reaches_the_core_only_through_its_controller() -> None:
    for path in (ROOT / "app" / "ui").glob("*.py"):
        if path.name in ("controller.py", "app.py"):
            continue
        for name in imports(path):
            if name.startswith("app.") and name != "app.__version__":
                assert name.startswith(UI_MAY_IMPORT), f"ui/{path.name} imports {name}"


def test_the_core_never_imports_the_ui() -> None:
    for path in (ROOT / "app").rglob("*.py"):
        rel = path.relative_to(ROOT / "app")
        if rel.parts[0] == "ui" or str(rel) in ("cli.py", "demo/run.py"):  # entries start it
            continue
        assert not any(n.startswith("app.ui") for n in imports(path)), rel


def test_hot_path_loads_only_builtins(tmp_path: Path) -> None:
    """What `python -IS` has loaded after importing the helper's entry, beyond a bare start."""
    code = (
        "import sys; before = set(sys.modules); sys.path.insert(0, sys.argv[1]); "
        "import exec_helper.__main__, exec_helper.transport; print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-IS", "-c", code, str(ROOT)], capture_output=True, text=True, check=True
    )
    loaded = set(out.stdout.split())
    assert loaded <= HOT_PATH_ALLOWED, loaded - HOT_PATH_ALLOWED


def test_one_version_from_git_for_both_programs() -> None:
    """The version is written in one place: git (setuptools-scm writes exec_helper/_version.py
    from it), and both programs read it from there (a package: from its build file)."""
    import tomllib

    from app import __version__
    from exec_helper import version

    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    scm = project["tool"]["setuptools_scm"]
    assert scm["version_file"] == "exec_helper/_version.py"
    assert __version__ is version.VERSION
    if version.BUILD is None:  # a development install: what `make install` wrote
        from exec_helper._version import VERSION

        assert __version__ == VERSION
    written = re.compile(r"""(VERSION|__version__)\s*=\s*["']\d""")
    for path in [*(ROOT / "app").rglob("*.py"), *(ROOT / "exec_helper").rglob("*.py")]:
        if path.name != "_version.py":
            assert not written.search(path.read_text()), f"{path} writes a version down"


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / "app" / package).rglob("*.py"))


def test_the_broker_imports_no_use_case_and_not_the_agent() -> None:
    """Layers: the agent's door → use cases → broker. Nothing runs back up."""
    for path in _modules("broker"):
        for name in imports(path):
            assert not name.startswith(("app.usecases", "app.agent", "app.compose")), (
                f"broker/{path.name} imports {name}"
            )


def test_use_cases_do_not_import_the_agent() -> None:
    for path in _modules("usecases"):
        for name in imports(path):
            assert not name.startswith("app.agent"), f"usecases/{path.name} imports {name}"


IDENTITY_STATE = {
    # what each owner keeps per identity, and the names the old shared bag had
    "_sessions", "_flights", "_usage", "_states", "_blocks", "_logins",
    "loaded", "clients", "blocked_until", "blocked_reason", "blocked_for",
    "last_error", "legacy_key",
}  # fmt: skip


def _attributes(path: Path) -> set[str]:
    return {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}


def test_nothing_outside_the_broker_reads_identity_state() -> None:
    """Identity state is its owners' (registry, logins, flights, broker); everyone else asks
    them with methods that say what they want, or reads IdentityStatus."""
    for path in (ROOT / "app").rglob("*.py"):
        rel = path.relative_to(ROOT / "app")
        if rel.parts[0] == "broker":
            continue
        used = _attributes(path) & IDENTITY_STATE
        assert not used, f"{rel} reads {sorted(used)}"
        private = {
            f"{n}"
            for n in imports(path)
            if n.startswith("app.broker.") and n.rsplit(".", 1)[1].startswith("_")
        }
        assert not private, f"{rel} imports {sorted(private)}"


CONTROLLER_MAY_IMPORT = ("app.broker", "app.compose", "app.usecases", "app.kubeconfig")
"""What the controller (the views' only way in) uses of the core."""


def test_the_controller_reaches_the_core_through_the_broker_and_the_use_cases() -> None:
    for name in imports(ROOT / "app" / "ui" / "controller.py"):
        if name.startswith("app.") and not name.startswith(UI_MAY_IMPORT):
            assert name.startswith(CONTROLLER_MAY_IMPORT), f"ui/controller.py imports {name}"
