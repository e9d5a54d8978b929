"""Run the django-oauth-toolkit OpenID Provider on 127.0.0.1, a free port.

``python -m tests.providers.dot.serve '{"dir": "/tmp/x", "access_ttl": 10, ...}'`` prints one
JSON line ``{"issuer": ...}`` when it serves. A fresh RSA signing key each start; the database
is a copy of one migrated once per DOT version (migrating costs seconds, a copy milliseconds).
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _migrated_template() -> Path:
    """A migrated, empty database, made once per Django + DOT version."""
    import django
    import oauth2_provider
    from django.core.management import call_command
    from django.db import connection

    tag = hashlib.sha256(f"{django.__version__}-{oauth2_provider.__version__}".encode()).hexdigest()
    template = Path(tempfile.gettempdir()) / f"kubetray-dot-{tag[:12]}.sqlite3"
    if not template.exists():
        call_command("migrate", verbosity=0, interactive=False)
        connection.close()
        partial = template.with_suffix(f".{os.getpid()}")
        shutil.copyfile(connection.settings_dict["NAME"], partial)
        os.replace(partial, template)
    return template


def main() -> int:
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    options = json.loads(sys.argv[1] if len(sys.argv) > 1 else "{}")
    workdir = Path(options.get("dir") or tempfile.mkdtemp(prefix="kubetray-dot-"))
    server = ThreadedWSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    db = workdir / "db.sqlite3"
    run = {**options, "db": str(db), "base": base, "rsa_private_key": _rsa_pem()}
    os.environ["KUBETRAY_DOT_SETTINGS"] = json.dumps(run)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.providers.dot.settings"

    import django

    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from django.db import connection

    template = _migrated_template()
    connection.close()
    shutil.copyfile(template, db)
    call_command("bootstrap")
    server.set_app(get_wsgi_application())
    print(json.dumps({"issuer": base + "/o", "db": str(db)}), flush=True)
    server.serve_forever(poll_interval=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
