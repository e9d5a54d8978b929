"""`kubetray import --undo` as a person meets it: per file, exact, and shown as it is written.

The import keeps every byte of a file but the users it switches (comments, flow style, quoting,
folded hints); its undo puts back the backup's bytes while the file is as the import left it,
and otherwise only the imported users' bodies, spelled as they were. The dry run prints the
diff of exactly those bytes. Every real-world shape of tests/kubeconfig/corpus and the EKS
fixtures (aws eks update-kubeconfig, aws-iam-authenticator's README) go through the real CLI.
"""

import difflib
import shutil
import subprocess
from pathlib import Path

import pytest

from app.kubeconfig import files
from app.kubeconfig.edit import same_user
from tests.peers import KubetrayEnv, kubectl_binaries, require

HERE = Path(__file__).parent
SHAPES = sorted(
    [p for p in (HERE / "corpus").glob("*/*") if p.is_file()]
    + list((HERE.parent / "aws" / "fixtures").glob("*.yaml"))
)
IMPORTS_NOTHING = {"4-legacy-aad-v1", "static-secrets/config"}
"""Shapes with no user of a tool kubetray replaces (nothing to import, so nothing to undo)."""


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _cli(kt: KubetrayEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return kt.kubetray(*args, timeout=120)


@pytest.mark.parametrize("shape", SHAPES, ids=_id)
def test_import_then_undo_gives_back_the_file_byte_for_byte(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path, shape: Path
) -> None:
    (tmp_path / "kube").mkdir()
    path = tmp_path / "kube" / shape.name
    shutil.copy(shape, path)
    original = path.read_bytes()
    done = _cli(kt, "import", "--kubeconfig", str(path), "--yes")
    if _id(shape) in IMPORTS_NOTHING or shape.name in IMPORTS_NOTHING:
        assert "nothing to import" in done.stdout and path.read_bytes() == original
        return
    assert done.returncode == 0, done.stderr
    imported = path.read_bytes()
    assert imported != original
    undone = _cli(kt, "import", "--kubeconfig", str(path), "--undo", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert path.read_bytes() == original


def test_undo_of_one_file_leaves_another_file_s_import_alone(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """import A, import B, undo A: A comes back, B stays imported (its undo is still there)."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    shutil.copy(HERE.parent / "aws" / "fixtures" / "update-kubeconfig-default.yaml", a)
    shutil.copy(HERE / "corpus" / "gcloud-528" / "config", b)
    a_before, b_before = a.read_bytes(), b.read_bytes()
    for f in (a, b):
        assert _cli(kt, "import", "--kubeconfig", str(f), "--yes").returncode == 0
    b_imported = b.read_bytes()
    undone = _cli(kt, "import", "--kubeconfig", str(a), "--undo", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert a.read_bytes() == a_before and b.read_bytes() == b_imported
    # A has nothing left to undo; the line says which file does
    again = _cli(kt, "import", "--kubeconfig", str(a), "--undo", "--yes")
    assert again.returncode != 0
    assert f"there is no import of {a} to undo" in again.stderr
    assert f"--kubeconfig {b} --undo" in again.stderr
    assert _cli(kt, "import", "--kubeconfig", str(b), "--undo", "--yes").returncode == 0
    assert b.read_bytes() == b_before


def test_a_file_changed_since_the_import_gets_only_its_imported_users_back(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """Someone added a line after the import: the undo keeps it, and every other byte, and
    puts the imported users back as they were spelled (block scalars, folded hints)."""
    (tmp_path / "kube").mkdir()
    path = tmp_path / "kube" / "config"
    shutil.copy(HERE / "corpus" / "cloud-plugins" / "config", path)
    original = path.read_text()
    assert _cli(kt, "import", "--kubeconfig", str(path), "--yes").returncode == 0
    added = "# added by hand after the import\n"
    path.write_text(path.read_text() + added)
    done = _cli(kt, "import", "--kubeconfig", str(path), "--undo", "--yes")
    assert done.returncode == 0, done.stderr
    assert path.read_text() == original + added


@pytest.mark.kubectl
def test_undo_after_kubectl_rewrote_the_file_reverts_only_kubetray_s_users(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """kubectl config rewrites the whole file (its own formatting and defaults): the undo puts
    the imported users back and keeps what kubectl wrote, including the context it added."""
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    (tmp_path / "kube").mkdir()
    path = tmp_path / "kube" / "config"
    fixture = (HERE.parent / "aws" / "fixtures" / "aws-iam-authenticator.yaml").read_text()
    path.write_text(fixture.replace("CA_DATA", "Y2E="))  # base64, as kubectl wants it
    original = files.read(str(path)).data
    assert _cli(kt, "import", "--kubeconfig", str(path), "--yes").returncode == 0
    set_context = subprocess.run(
        [binaries["1.33"], "--kubeconfig", str(path), "config", "set-context", "extra"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert set_context.returncode == 0, set_context.stderr
    by_kubectl = files.read(str(path)).data
    done = _cli(kt, "import", "--kubeconfig", str(path), "--undo", "--yes")
    assert done.returncode == 0, done.stderr
    after = files.read(str(path)).data
    assert "extra" in {c["name"] for c in after["contexts"]}
    assert {k: v for k, v in after.items() if k != "users"} == {
        k: v for k, v in by_kubectl.items() if k != "users"
    }
    for user in original["users"]:
        back = next(u for u in after["users"] if u["name"] == user["name"])
        assert same_user(back["user"], user["user"]), user["name"]


def test_the_dry_run_shows_exactly_the_bytes_that_are_then_written(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    (tmp_path / "kube").mkdir()
    path = tmp_path / "kube" / "config"
    shutil.copy(HERE / "corpus" / "cloud-plugins" / "config", path)
    for undo in ((), ("--undo",)):
        if undo:
            path.write_text(path.read_text() + "# a note\n")  # a minimal edit, not the backup
        before = path.read_text()
        dry = _cli(kt, "import", "--kubeconfig", str(path), *undo, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert path.read_text() == before
        assert _cli(kt, "import", "--kubeconfig", str(path), *undo, "--yes").returncode == 0
        written = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                path.read_text().splitlines(keepends=True),
                fromfile=str(path),
                tofile=str(path),
            )
        )
        assert written and dry.stdout.startswith(written)
        assert dry.stdout[len(written) :].strip() == "(dry run: nothing written)"
