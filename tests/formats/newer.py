"""Write the made-up newer kubetray's files, from 0.1.0's (tests/formats/0.1.0):

    python -m tests.formats.newer

``9.0.0-fields/``: kubetray 9.0.0 in the same formats with fields this version does not know (a
reader keeps them). ``9.0.0-format/``: kubetray 9.0.0 in newer formats (a reader refuses them
in one line and leaves them as they are). Both are committed; tests/unit/test_formats.py loads
them.
"""

import base64
import json
import shutil
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OLD = HERE / "0.1.0"
WRITER = "9.0.0"


def _json(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _item(keyring: dict[str, str], key: str, change: Any, prefix: str = "inline:") -> None:
    doc = json.loads(base64.b64decode(keyring[key].removeprefix("inline:")))
    doc = change(doc) or doc
    keyring[key] = prefix + base64.b64encode(json.dumps(doc).encode()).decode()


def fields(out: Path) -> None:
    """Same formats, new fields everywhere."""
    cfg = out / "config"
    _json(cfg / "settings.json", lambda d: d.update(version=1, kubetray=WRITER, theme="dark"))

    def identities(d: dict[str, Any]) -> None:
        d.update(kubetray=WRITER, order=["prod"])
        prod = next(e for e in d["identities"].values() if e["name"] == "prod")
        prod["color"] = "red"
        prod["settings"]["pkce_method"] = "S512"

    _json(cfg / "identities.json", identities)

    def stored(d: dict[str, Any]) -> None:
        d.update(kubetray=WRITER, last_audit="2027-01-01")
        d["credentials"]["deploy"]["rotate_after"] = "2027-02-01"

    _json(cfg / "stored.json", stored)
    _json(cfg / "remote-hosts.json", lambda d: d.update(version=1, kubetray=WRITER, ask="x"))

    def journal(d: dict[str, Any]) -> None:
        d.update(kubetray=WRITER, pruned=3)
        d["backups"][0]["sha256"] = "00" * 32

    _json(out / "state" / "kubeconfig-backups.json", journal)
    keyring = json.loads((out / "keyring.json").read_text())
    tokens = next(k for k in keyring if k.startswith("oidc/"))
    _item(keyring, tokens, lambda d: d.update(dpop_key="kid-1"))
    _item(keyring, "stored/deploy", lambda d: d.update(rotate_after="2027-02-01"))
    _item(keyring, "kubeconfig/imports", lambda d: d[0][0].update(tool="kubelogin 1.30"))
    (out / "keyring.json").write_text(json.dumps(keyring, indent=2, sort_keys=True) + "\n")


def newer_format(out: Path) -> None:
    """Newer formats: what no reader of this version may read, nor rewrite."""
    cfg = out / "config"
    _json(cfg / "settings.json", lambda d: d.update(version=2, kubetray=WRITER))
    _json(cfg / "identities.json", lambda d: d.update(version=3, kubetray=WRITER))
    _json(cfg / "stored.json", lambda d: d.update(version=2, kubetray=WRITER))
    _json(cfg / "remote-hosts.json", lambda d: d.update(version=2, kubetray=WRITER))
    _json(
        out / "state" / "kubeconfig-backups.json",
        lambda d: d.update(version=2, kubetray=WRITER),
    )
    keyring = json.loads((out / "keyring.json").read_text())
    tokens = next(k for k in keyring if k.startswith("oidc/"))
    _item(keyring, tokens, lambda d: d.update(version=2, kubetray=WRITER))
    _item(keyring, "stored/deploy", lambda d: d.update(version=2, kubetray=WRITER))
    _item(
        keyring,
        "kubeconfig/imports",
        lambda d: {"version": 2, "kubetray": WRITER, "batches": d},
    )
    keyring["stored/envelope"] = "sealed.v2:" + "0" * 32 + ".sealed"
    (out / "keyring.json").write_text(json.dumps(keyring, indent=2, sort_keys=True) + "\n")


def main() -> None:
    for name, make in ((f"{WRITER}-fields", fields), (f"{WRITER}-format", newer_format)):
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(OLD, out)
        make(out)


if __name__ == "__main__":
    main()
