"""A KUBECONFIG of many files (a platform engineer's, one per team) through secure, unsecure and
import: one backup write and one index write for all the files, progress at each step, and
every file's own backup restorable (issue 33: secure over 500 files took 99 s, silently)."""

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app import cli_kubeconfig, jsonfile
from app.kubeconfig import edit, files, records
from app.kubeconfig.backups import IN_STORE, IN_STORE_SHARED, KEEP, ON_DISK, Backups
from app.static_credentials import StoredCredentials
from app.store.memory_store import MemorySecretStore
from app.usecases.import_kubelogin import ImportKubelogin
from app.usecases.secrets import Secrets

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
HELPER = "/opt/kubetray/kubetray-exec"
N = 12


class Store(MemorySecretStore):
    """A MemorySecretStore that notes the key of each write (a keyring write is the cost)."""

    def __init__(self) -> None:
        super().__init__()
        self.sets: list[str] = []

    def set(self, key: str, value: bytes) -> None:
        self.sets.append(key)
        super().set(key, value)


class Steps:
    """A progress listener that keeps what it heard."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, int, int, str]] = []

    def __call__(self, step: str, done: int, total: int, item: str) -> None:
        self.heard.append((step, done, total, item))

    def of(self, step: str) -> list[tuple[int, int]]:
        return [(done, total) for s, done, total, _ in self.heard if s == step]


def team_files(where: Path, n: int, user: str = "token: static-{i}") -> list[str]:
    where.mkdir(exist_ok=True)
    paths = []
    for i in range(n):
        path = where / f"team-{i:02d}.yaml"
        body = user.format(i=i)
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: c{i}\n  cluster:\n    server: https://10.0.0.{i}:6443\n"
            f"users:\n- name: bot-{i}\n  user:\n    {body}\n"
            f"contexts:\n- name: ctx-{i}\n  context:\n    cluster: c{i}\n    user: bot-{i}\n"
        )
        paths.append(str(path))
    return paths


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Store, StoredCredentials, Backups, Secrets, list[str]]:
    store = Store()
    creds = StoredCredentials(store, str(tmp_path / "config" / "stored.json"))
    backups = Backups(str(tmp_path / "state" / "backups.json"), lambda: store)
    secrets = Secrets(store, creds, backups, HELPER, lambda _name: None)
    return store, creds, backups, secrets, team_files(tmp_path / "kube", N)


def test_secure_over_many_files_writes_the_backups_and_the_index_once_and_says_each_step(
    setup: tuple[Store, StoredCredentials, Backups, Secrets, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, creds, backups, secrets, paths = setup
    originals = {p: Path(p).read_bytes() for p in paths}
    saves: list[str] = []
    save = jsonfile.save
    monkeypatch.setattr(jsonfile, "save", lambda p, *a, **k: saves.append(p) or save(p, *a, **k))
    steps = Steps()
    plan = secrets.plan_secure(paths, None, NOW)
    written = secrets.apply_secure(plan, NOW, steps)

    assert len(written) == N and all(w.backup and w.backup.in_store for w in written)
    # One keyring write per credential (each is served on its own), one for the record of
    # what secure changed, one for the backups of all the files: not one per file.
    assert sorted(store.sets) == sorted(
        [f"stored/bot-{i}" for i in range(N)] + [records.SECURED, written[0].backup.ref]  # type: ignore[union-attr]
    )
    assert {w.backup.where for w in written} == {IN_STORE_SHARED}  # type: ignore[union-attr]
    assert saves.count(str(tmp_path / "config" / "stored.json")) == 1
    assert saves.count(str(tmp_path / "state" / "backups.json")) == 1
    assert [c.name for c in creds.list()] == sorted(f"bot-{i}" for i in range(N))
    assert steps.of("stored") == [(i, N) for i in range(1, N + 1)]
    assert steps.of("wrote") == [(i, N) for i in range(1, N + 1)]
    assert [item for s, *_, item in steps.heard if s == "wrote"] == sorted(paths)
    # Each file's backup is that file as it was, secrets and all; nothing of it on disk.
    assert {w.path: backups.content(w.backup) for w in written if w.backup} == originals
    assert not list((tmp_path / "kube").glob("*.bak"))


def test_unsecure_over_many_files_reads_and_removes_with_progress_and_one_index_write(
    setup: tuple[Store, StoredCredentials, Backups, Secrets, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, creds, _, secrets, paths = setup
    originals = {p: Path(p).read_text() for p in paths}
    secrets.apply_secure(secrets.plan_secure(paths, None, NOW), NOW)
    saves: list[str] = []
    save = jsonfile.save
    monkeypatch.setattr(jsonfile, "save", lambda p, *a, **k: saves.append(p) or save(p, *a, **k))
    steps = Steps()
    plan = secrets.plan_unsecure(None, steps)
    written = secrets.apply_unsecure(plan, steps)
    assert len(written) == N
    assert {p: files.read(p).data for p in paths} == {
        p: files.parse(p, text) for p, text in originals.items()
    }
    assert creds.list() == [] and saves.count(str(tmp_path / "config" / "stored.json")) == 1
    assert steps.of("read") == steps.of("wrote") == steps.of("removed")
    assert steps.of("read") == [(i, N) for i in range(1, N + 1)]


def test_backups_of_files_without_secrets_stay_beside_them_one_each(tmp_path: Path) -> None:
    store = Store()
    backups = Backups(str(tmp_path / "journal.json"), lambda: store)
    paths = team_files(tmp_path / "kube", 3, user="exec: {{command: kubectl, args: [{i}]}}")
    taken = backups.save_all([files.read(p) for p in paths], "test")
    assert [b.where for b in taken] == [ON_DISK] * 3 and store.sets == []
    assert [backups.content(b).decode() for b in taken] == [Path(p).read_text() for p in paths]
    assert len({b.id for b in taken}) == 3


def test_a_shared_backup_goes_with_the_last_file_that_refers_to_it(tmp_path: Path) -> None:
    """KEEP backups per file: the shared item of an old multi-file write stays while any of
    its files still keeps its backup there, and is deleted with the last one."""
    store = Store()
    backups = Backups(str(tmp_path / "journal.json"), lambda: store)
    a, b = team_files(tmp_path / "kube", 2)
    first = backups.save_all([files.read(a), files.read(b)], "secure --all")
    shared = first[0].ref
    assert first[0].where == IN_STORE_SHARED and first[1].ref == shared
    for i in range(KEEP):  # a's later backups, one file at a time: the old format, one item each
        single = backups.save(files.read(a), f"edit {i}")
        assert single.where == IN_STORE and single.ref != shared
    assert store.get(shared) is not None  # b's backup is still there
    assert backups.content(first[1]) == Path(b).read_bytes()
    for i in range(KEEP):
        backups.save(files.read(b), f"edit {i}")
    assert store.get(shared) is None
    assert all(e.ref != shared for e in backups.entries())


def test_edits_of_many_files_back_them_all_up_before_replacing_any(tmp_path: Path) -> None:
    """A failing file (a symlink to a non-kubeconfig) stops the edit before any file changes."""
    store = Store()
    backups = Backups(str(tmp_path / "journal.json"), lambda: store)
    paths = team_files(tmp_path / "kube", 4)
    (tmp_path / "notes.txt").write_text("shopping: [milk, bread]\n")
    link = tmp_path / "kube" / "team-99.yaml"
    link.symlink_to(tmp_path / "notes.txt")
    before = {p: Path(p).read_text() for p in paths}
    change = edit.Edit()
    for p in [*paths, str(link)]:
        change.add(p, lambda d: edit.upsert(d, "contexts", "new", {"cluster": "c0"}))
    with pytest.raises(files.KubeconfigError, match=r"symlink to .* not a kubeconfig"):
        edit.apply(change, backups, "test")
    assert {p: Path(p).read_text() for p in paths} == before
    assert not list((tmp_path / "kube").glob("*.lock"))


def test_import_of_many_files_says_each_file_written(tmp_path: Path) -> None:
    store = Store()
    backups = Backups(str(tmp_path / "journal.json"), lambda: store)
    user = (
        "exec: {{apiVersion: client.authentication.k8s.io/v1, command: kubectl, args: "
        "[oidc-login, get-token, --oidc-issuer-url=https://idp.example, --oidc-client-id=k{i}]}}"
    )
    paths = team_files(tmp_path / "kube", 5, user=user)
    imports = ImportKubelogin(
        records.ImportRecords(str(tmp_path / "imports.json"), store), backups, HELPER
    )
    steps = Steps()
    written = imports.apply_import(imports.plan_import(paths), steps)
    assert len(written) == 5 and steps.of("wrote") == [(i, 5) for i in range(1, 6)]
    assert all(HELPER in Path(p).read_text() for p in paths)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_a_line_per_step_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = io.StringIO()
    shown = cli_kubeconfig._Progress(log)
    shown("stored", 1, 1, "only-one")  # a single step: its report follows at once
    for i in range(1, 4):
        shown("wrote", i, 3, f"/k/team-{i}.yaml")
    shown("stored", 2, 3, "evil\x1b]52;c;aGk=\x07name")
    shown.close()
    assert log.getvalue().splitlines() == [
        "kubetray: wrote 1/3: /k/team-1.yaml",
        "kubetray: wrote 2/3: /k/team-2.yaml",
        "kubetray: wrote 3/3: /k/team-3.yaml",
        "kubetray: stored 2/3: evil\\x1b]52;c;aGk=\\x07name",
    ]

    monkeypatch.setenv("COLUMNS", "60")
    term = Terminal()
    bar = cli_kubeconfig._Progress(term)
    for i in range(1, 5):
        bar("wrote", i, 4, "/home/someone/.kube/teams/" + "x" * 80 + ".yaml")
    drawn = term.getvalue()
    assert "\n" not in drawn and drawn.count("\r\x1b[K") == 4
    assert all(len(line) <= 59 for line in drawn.split("\r\x1b[K"))
    assert drawn.split("\r\x1b[K")[-1].startswith("wrote [" + "#" * 24 + "] 4/4")
    bar.close()
    assert term.getvalue().endswith("\r\x1b[K")  # the report starts on a clean line


def test_unlisted_backup_files_beyond_the_kept_ones_go_oldest_first(tmp_path: Path) -> None:
    """What a killed kubetray left beside a file (written, never journaled), and only that."""
    backups = Backups(str(tmp_path / "journal.json"), Store)
    a, b = team_files(tmp_path / "kube", 2, user="exec: {{command: kubectl, args: [{i}]}}")
    left = [f"{a}.kubetray-2026010{i}-000000-000000000.bak" for i in range(1, 8)]
    other = [f"{b}.kubetray-20260101-000000-000000000.bak", f"{a}.kubetray-1.bak.txt"]
    for path in [*left, *other]:
        Path(path).write_text("old\n")
    taken = backups.save_all([files.read(a)], "test")
    kept = sorted(str(p) for p in (tmp_path / "kube").glob("team-00.yaml.kubetray-*.bak"))
    assert kept == sorted([*left[3:], taken[0].ref])
    assert all(Path(p).exists() for p in other)
