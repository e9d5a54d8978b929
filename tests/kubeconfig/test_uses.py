"""Which contexts use which identity, read from a KUBECONFIG of many files: per-cluster settings
come from each context's own cluster (the exec extension), the first file defining it wins."""

from pathlib import Path

from app.kubeconfig.uses import contexts_by_identity
from app.oidc.settings import OIDCSettings
from exec_helper.options import resolve


def _file(path: Path, i: int, issuer: str) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c{i}\n  cluster:\n    server: https://10.0.0.{i}:6443\n"
        "    extensions:\n    - name: client.authentication.k8s.io/exec\n"
        f"      extension: {{oidc-issuer-url: '{issuer}', oidc-client-id: k8s}}\n"
        f"users:\n- name: team\n  user:\n    exec:\n      command: /opt/kubetray/kubetray-exec\n"
        "      apiVersion: client.authentication.k8s.io/v1\n"
        f"contexts:\n- name: ctx-{i}\n  context: {{cluster: c{i}, user: team}}\n"
    )
    return str(path)


def test_one_user_many_clusters_each_naming_its_provider(tmp_path: Path) -> None:
    paths = [
        _file(tmp_path / f"team-{i:03d}.yaml", i, f"https://idp-{i % 3}.example") for i in range(60)
    ]
    # A later file defining c0 again is shadowed, as kubectl reads it.
    paths.append(_file(tmp_path / "zz-shadow.yaml", 0, "https://shadow.example"))
    found = contexts_by_identity(":".join(paths))

    def key(issuer: str) -> str:
        opts = resolve([f"--oidc-issuer-url={issuer}", "--oidc-client-id=k8s"])
        return OIDCSettings.from_options(opts).key

    assert set(found) == {key(f"https://idp-{n}.example") for n in range(3)}
    for n in range(3):
        uses = found[key(f"https://idp-{n}.example")]
        assert [u.context for u in uses] == [f"ctx-{i}" for i in range(60) if i % 3 == n]
        assert {u.user for u in uses} == {"team"}
