"""Real-world kubeconfig shapes through setup, import, secure and their undos, against goldens.

Each corpus case is a directory of kubeconfig files (read in name order as one KUBECONFIG) and
the files they refer to. The goldens under golden/<case>/<operation>/ are what kubetray writes;
regenerate them with KUBETRAY_UPDATE_GOLDEN=1 and review the diff like code.
Round trips (import then undo, secure then unsecure) must give back the same content.
"""

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.kubeconfig import edit, files, migrate, records, secure, setup
from app.kubeconfig.backups import IN_STORE, Backups
from app.kubeconfig.view import View
from app.store.memory_store import MemorySecretStore

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
GOLDEN = HERE / "golden"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
HELPER = "/opt/kubetray/kubetray-exec"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
UPDATE = os.environ.get("KUBETRAY_UPDATE_GOLDEN") == "1"


class Case:
    """A corpus case copied into a scratch directory, with an in-memory secret store."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.name = name
        self.dir = tmp / name
        shutil.copytree(CORPUS / name, self.dir)
        self.paths = sorted(
            str(p) for p in self.dir.iterdir() if p.is_file() and not p.name.startswith(".")
        )
        self.store = MemorySecretStore()
        self.backups = Backups(str(tmp / "state" / "backups.json"), lambda: self.store)
        self.original = {p: files.read(p).data for p in self.paths}

    def view(self) -> View:
        return View.load(self.paths)

    def apply(self, e: edit.Edit, op: str) -> list[edit.Written]:
        return edit.apply(e, self.backups, op)

    def contents(self) -> dict[str, dict[str, Any]]:
        return {p: files.read(p).data for p in self.paths}

    def check_golden(self, operation: str) -> None:
        for path in self.paths:
            name = os.path.basename(path)
            golden = GOLDEN / self.name / operation / name
            text = Path(path).read_bytes()
            if UPDATE:
                golden.parent.mkdir(parents=True, exist_ok=True)
                golden.write_bytes(text)
            assert golden.exists(), f"no golden {golden}: run with KUBETRAY_UPDATE_GOLDEN=1"
            assert text == golden.read_bytes(), f"{name} after {operation}"


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Case:
    return Case(request.param, tmp_path)


def _users(data: dict[str, Any]) -> dict[str, Any]:
    return {u["name"]: u["user"] for u in data.get("users") or []}


def test_setup_adds_cluster_user_and_context(case: Case) -> None:
    request = setup.Setup(
        issuer="https://idp.example/realms/k8s",
        client_id="kubectl",
        helper=HELPER,
        scopes=("email", "groups"),
        context="kubetray-new",
        server="https://new.example:6443",
        ca_data="Y2E=",
    )
    plan, context = setup.plan(request, case.view())
    case.apply(plan, "setup")
    case.check_golden("setup")
    view = case.view()
    assert context == "kubetray-new"
    user = view.get("users", "kubetray-new")
    assert user is not None and user["user"]["exec"]["command"] == HELPER
    assert user["user"]["exec"]["interactiveMode"] == "IfAvailable"
    # Nothing else changed: every earlier entry of every file is still there, the same.
    for path, before in case.original.items():
        after = files.read(path).data
        for kind in ("clusters", "users", "contexts"):
            for entry in before.get(kind) or []:
                assert entry in (after.get(kind) or []), f"{entry.get('name')} lost in {path}"


def _env(exec_: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in exec_.get("env") or []}


def _converted(name: str, body: dict[str, Any]) -> tuple[str, list[str]]:
    """(provider kind, kubetray-exec's args) an import must write for a user."""
    if "exec" not in body:  # auth-provider: azure, as kubelogin convert-kubeconfig writes it
        config = body["auth-provider"]["config"]
        assert body["auth-provider"]["name"] == "azure" and config["config-mode"] == "1"
        args = ["get-token", "--login", "devicecode", "--server-id", config["apiserver-id"]]
        args += ["--client-id", config["client-id"], "--tenant-id", config["tenant-id"]]
        return "entra", [*args, "--environment", config["environment"]]
    exec_ = body["exec"]
    flags = migrate.kubelogin_flags(exec_)
    if flags is not None:
        return "oidc", ["get-token", *flags, f"--name={name}"]  # named as the user
    if os.path.basename(exec_["command"]) == "gke-gcloud-auth-plugin":
        return "google", ["gke-gcloud-auth-plugin", *(exec_.get("args") or [])]
    if os.path.basename(exec_["command"]) in ("aws", "aws-iam-authenticator"):
        return "aws", list(exec_.get("args") or [])  # only the command changes (and env stays)
    if "kubelogin" in exec_["command"]:  # Azure's: its own command line, every flag kept
        return "entra", list(exec_["args"])
    raise AssertionError(f"{name} was converted, but this test knows no rule for it")


def test_import_rewrites_only_users_of_replaced_tools_and_undo_restores(case: Case) -> None:
    from app.providers import default
    from app.providers.aws.command import parse

    plan, changes, skipped = migrate.plan(case.view(), HELPER)
    case.apply(plan, "import")
    case.check_golden("import")
    after = case.contents()
    for path, before in case.original.items():
        changed = {c.user for c in changes if c.file == path}
        for name, body in _users(before).items():
            if name in changed:
                new = _users(after[path])[name]["exec"]
                kind, args = _converted(name, body)
                assert new["command"] == HELPER and new["args"] == args
                assert new["apiVersion"] == body.get("exec", new)["apiVersion"]
                if kind == "aws":  # the profile is the person's (no ~/.aws here): read only
                    assert new.get("env") == body["exec"].get("env")
                    parse(new["args"], _env(new))  # the same command line, read as the CLI
                else:
                    assert default().wanted(new["args"]).kind == kind  # it means that again
            else:  # other auth-providers, unknown flags: untouched
                assert _users(after[path])[name] == body
    # Left as they are, with the reason: a kubelogin flag kubetray does not know, an
    # impersonating GKE user (kubetray does not impersonate service accounts), and an AKS
    # cluster of the retired Azure AD v1 integration (--legacy).
    assert {s.user for s in skipped} <= {
        "future",
        "gke_kubetray-proof_europe-west1_sa",
        "clusterUser_rg-demo_aks-4",
    }
    case.apply(records.undo(changes), "import --undo")
    assert case.contents() == case.original


def test_secure_moves_static_secrets_and_unsecure_puts_them_back(case: Case) -> None:
    from app.static_credentials import StoredCredentials

    creds = StoredCredentials(case.store, str(case.dir / ".stored.json"))
    plan, moves, skipped = secure.plan(case.view(), None, HELPER, set(), NOW)
    for m in moves:
        creds.save(m.credential, NOW)
    written = case.apply(plan, "secure")
    case.check_golden("secure")
    for w in written:
        assert w.backup is not None and w.backup.where == IN_STORE  # it held secrets
    after = case.contents()
    for m in moves:
        body = _users(after[m.change.file])[m.change.user]
        assert body["exec"]["args"] == ["--stored", m.credential.name]
        assert not set(body) & set(secure.STATIC)
    assert {s.user for s in skipped} <= {"basic"}
    restore = [secure.restorable(m.change, creds.load(m.credential.name)) for m in moves]
    case.apply(records.undo(restore), "unsecure")
    assert case.contents() == case.original


def test_static_secrets_case_covers_every_kind(tmp_path: Path) -> None:
    c = Case("static-secrets", tmp_path)
    _, moves, skipped = secure.plan(c.view(), None, HELPER, set(), NOW)
    kinds = {m.change.user: m.credential.kind for m in moves}
    assert kinds == {
        "admin-token": "token",
        "deploy-bot": "token",
        "user-a": "client-certificate",
        "user-b": "client-certificate",
        "impersonator": "token",
    }
    assert [s.user for s in skipped] == ["basic"] and "basic auth" in skipped[0].reason
    deploy = next(m for m in moves if m.change.user == "deploy-bot")
    assert deploy.credential.token == "deploy-bot-token-2b9e41"  # read relative to the file
    imp = next(m for m in moves if m.change.user == "impersonator")
    assert imp.change.after["as"] == "system:serviceaccount:ops:deployer"


def test_unsecure_inlines_secrets_whose_files_are_gone(tmp_path: Path) -> None:
    from app.static_credentials import StoredCredentials

    c = Case("static-secrets", tmp_path)
    creds = StoredCredentials(c.store, str(tmp_path / "stored.json"))
    plan, moves, _ = secure.plan(c.view(), ["user-b", "deploy-bot"], HELPER, set(), NOW)
    for m in moves:
        creds.save(m.credential, NOW)
    c.apply(plan, "secure")
    shutil.rmtree(c.dir / "files")
    restore = [secure.restorable(m.change, creds.load(m.credential.name)) for m in moves]
    c.apply(records.undo(restore), "unsecure")
    users = _users(files.read(c.paths[0]).data)
    assert users["deploy-bot"] == {"token": "deploy-bot-token-2b9e41"}
    assert set(users["user-b"]) == {"client-certificate-data", "client-key-data"}
