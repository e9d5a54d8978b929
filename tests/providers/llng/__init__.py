"""LemonLDAP::NG (Debian's lemonldap-ng) as an OpenID Provider, behind nginx, as its docs say.

Each start gets a private directory: a lemonldap-ng.ini naming a File configuration there,
Debian's demo configuration (the Demo authentication backend: dwho/dwho) with the OpenID
Connect issuer turned on through `lemonldap-ng-cli merge` (the documented way to script the
configuration), sessions on disk, llng-fastcgi-server on a Unix socket and nginx on a free
loopback port with Debian's portal-nginx.conf site.
"""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

DEBIAN_CONF = Path("/var/lib/lemonldap-ng/conf/lmConf-1.json")
DEBIAN_INI = Path("/etc/lemonldap-ng/lemonldap-ng.ini")
CLI = "/usr/share/lemonldap-ng/bin/lemonldap-ng-cli"
FASTCGI = "/usr/sbin/llng-fastcgi-server"
NGINX = "/usr/sbin/nginx"
USER = "www-data"


def available() -> bool:
    return all(Path(p).exists() for p in (DEBIAN_CONF, DEBIAN_INI, CLI, FASTCGI, NGINX))


def version() -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "lemonldap-ng"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keys() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def _rp(client_id: str, redirects: str, ttl: int) -> dict[str, Any]:
    """A public RP with PKCE required, refresh tokens, the exact redirect URIs given."""
    return {
        "oidcRPMetaDataOptionsClientID": client_id,
        "oidcRPMetaDataOptionsPublic": 1,
        "oidcRPMetaDataOptionsRequirePKCE": 1,
        "oidcRPMetaDataOptionsRedirectUris": redirects,
        "oidcRPMetaDataOptionsRefreshToken": 1,
        "oidcRPMetaDataOptionsIDTokenSignAlg": "RS256",
        "oidcRPMetaDataOptionsIDTokenExpiration": ttl,
        "oidcRPMetaDataOptionsAccessTokenExpiration": ttl,
        "oidcRPMetaDataOptionsBypassConsent": 0,
        "oidcRPMetaDataOptionsDisplayName": client_id,
    }


@contextlib.contextmanager
def run(ttl: int = 3600) -> Iterator[dict[str, Any]]:
    """Start LemonLDAP::NG; yields its issuer, the loopback redirect port and its directory."""
    d = Path(tempfile.mkdtemp(prefix="kt-llng-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for sub in ("conf", "sessions/lock", "psessions/lock", "cache", "notifications", "tmp"):
            (d / sub).mkdir(parents=True)
        port, loopback = free_port(), free_port()
        base = f"http://127.0.0.1:{port}"
        ini = DEBIAN_INI.read_text().replace("/var/lib/lemonldap-ng", str(d))
        (d / "lemonldap-ng.ini").write_text(ini.replace("logLevel     = warn", "logLevel = info"))
        conf = json.loads(DEBIAN_CONF.read_text().replace("/var/lib/lemonldap-ng", str(d)))
        (d / "conf" / "lmConf-1.json").write_text(json.dumps(conf))
        private, public = _keys()
        redirect = f"http://127.0.0.1:{loopback}/"
        oidc = {
            "portal": base + "/",
            "domain": "127.0.0.1",
            "issuerDBOpenIDConnectActivation": 1,
            "oidcServiceMetaDataIssuer": base,
            "oidcServicePrivateKeySig": private,
            "oidcServicePublicKeySig": public,
            "oidcServiceKeyIdSig": "kubetray-test",
            "oidcRPMetaDataOptions": {
                "kubectl": _rp("kubectl", redirect, ttl),
                "kubelogin": _rp("kubelogin", "http://localhost:8000 http://localhost:18000", 3600),
            },
            "oidcRPMetaDataExportedVars": {
                rp: {"email": "mail", "name": "cn", "preferred_username": "uid"}
                for rp in ("kubectl", "kubelogin")
            },
        }
        (d / "oidc.json").write_text(json.dumps(oidc))
        # The portal refuses to run as root: everything runs as Debian's www-data, as packaged.
        subprocess.run(["chown", "-R", f"{USER}:{USER}", str(d)], check=True)
        env = {**os.environ, "LLNG_DEFAULTCONFFILE": str(d / "lemonldap-ng.ini")}
        env["LLNG_DEFAULTLOGGER"] = "Lemonldap::NG::Common::Logger::Std"
        merged = subprocess.run(
            [
                CLI,
                f"--user={USER}",
                f"--group={USER}",
                "-yes",
                "1",
                "-iniFile",
                str(d / "lemonldap-ng.ini"),
                "merge",
                str(d / "oidc.json"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert merged.returncode == 0, merged.stdout + merged.stderr
        sock = d / "llng.sock"
        with (d / "fastcgi.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [FASTCGI, "--foreground", "-u", USER, "-g", USER, "-n", "2", "-s", str(sock)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        site = Path("/etc/lemonldap-ng/portal-nginx.conf").read_text()
        site = (
            site.replace("unix:/var/run/llng-fastcgi-server/llng-fastcgi.sock", f"unix:{sock}")
            .replace("listen 80;", f"listen 127.0.0.1:{port};")
            .replace("listen [::]:80;", "")
            .replace("server_name auth.example.com;", "server_name 127.0.0.1;")
        )
        (d / "nginx.conf").write_text(
            f"""daemon off;
user {USER};
pid {d}/nginx.pid;
error_log {d}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
  include /etc/nginx/mime.types;
  access_log {d}/nginx-access.log;
  client_body_temp_path {d}/tmp/body;
  fastcgi_temp_path {d}/tmp/fastcgi;
  proxy_temp_path {d}/tmp/proxy;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
{site}
}}
"""
        )
        with (d / "nginx.out").open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [NGINX, "-p", str(d), "-c", str(d / "nginx.conf")],
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                )
            )
        issuer = base
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(
                    issuer + "/.well-known/openid-configuration", timeout=10
                ) as r:
                    json.load(r)
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise AssertionError(
                        "LemonLDAP::NG did not start: "
                        + (d / "fastcgi.log").read_text(errors="replace")[-3000:]
                    ) from None
                time.sleep(0.1)
        yield {"issuer": issuer, "loopback_port": loopback, "dir": d, "env": env}
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        shutil.rmtree(d, ignore_errors=True)
