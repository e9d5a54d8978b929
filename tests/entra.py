"""Microsoft Entra ID for tests: npm oidc-provider dressed as Entra (tests/oidc/entra.mjs), a
person who logs in on its pages over plain HTTP, and what AKS accepts.

Entra is not reachable here; the stand-in follows Microsoft's documentation and what MSAL for
Python sends (/work/notes/aks-gke.md §B, §C.2).
"""

import contextlib
import html.parser
import json
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.idp import idp_available, start_node, stop_node
from tests.peers import require
from tests.pki import CA

AKS_SERVER = "6dae42f8-4368-4678-94ff-3960e28e3630"
AKS_CLIENT = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
WORKLOAD_AUDIENCE = "api://AzureADTokenExchange"
START_TIMEOUT = 30.0


@dataclass
class Entra:
    """A running stand-in: ``authority`` (https://HOST:PORT/<tid>) and what it announced."""

    authority: str
    issuer: str
    host: str
    tenant: str
    domain: str
    v1_issuer: str
    sp_secret: dict[str, str]
    sp_workload: str
    ca_file: Path
    ca: CA
    process: subprocess.Popen[str]
    dir: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"https://{self.host}"

    def _session(self) -> Any:
        import requests

        s = requests.Session()
        s.trust_env = False  # REQUESTS_CA_BUNDLE would beat verify= (aks-gke.md §C.2)
        s.verify = str(self.ca_file)
        return s

    def get(self, path: str) -> Any:
        with self._session() as s:
            r = s.get(self.base + path, timeout=10)
            return r.json()

    def counts(self) -> dict[str, int]:
        return dict(self.get("/test/counts"))

    def seen(self, path_end: str = "") -> list[dict[str, Any]]:
        return [e for e in self.get("/test/seen") if e["path"].endswith(path_end)]

    def challenge(self, user: str, claims: str | None = None) -> None:
        """The user's next refreshes need multi-factor authentication (AADSTS50076) until a
        login that carries ``claims``."""
        query = {"user": user, **({"claims": claims} if claims else {})}
        self.get("/test/challenge?" + urllib.parse.urlencode(query))

    def revoke(self, user: str) -> None:
        self.get(f"/test/revoke?user={user}")

    def set_clock(self, offset: float) -> None:
        self.get(f"/test/clock?offset={offset:g}")

    def jwks(self) -> dict[str, Any]:
        return dict(self.get(f"/{self.tenant}/discovery/keys"))


@contextlib.contextmanager
def run_entra(host: str = "127.0.0.1", port: int = 0, **settings: Any) -> Iterator[Entra]:
    """Start the Entra stand-in on ``host`` (port 0: any free one)."""
    require(
        idp_available(), "oidc-provider is not installed: run `make test` (npm ci in tests/oidc)"
    )
    ca = CA("entra stand-in CA")
    issued = ca.issue(host, server=True, addresses=(host,))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "tls.crt").write_bytes(issued.cert_pem)
        (d / "tls.key").write_bytes(issued.key_pem)
        (d / "ca.crt").write_bytes(ca.cert_pem)
        full = {
            "cert": str(d / "tls.crt"),
            "key": str(d / "tls.key"),
            "host": host,
            "port": port,
            "deviceInterval": 1,
            **settings,
        }
        proc, line = start_node("entra.mjs", full, "the Entra stand-in", START_TIMEOUT)
        try:
            doc = json.loads(line)
            yield Entra(
                authority=doc["authority"],
                issuer=doc["issuer"],
                host=doc["host"],
                tenant=doc["tenant"],
                domain=doc["domain"],
                v1_issuer=doc["v1_issuer"],
                sp_secret=doc["sp_secret"],
                sp_workload=doc["sp_workload"],
                ca_file=d / "ca.crt",
                ca=ca,
                process=proc,
                dir=d,
            )
        finally:
            stop_node(proc)


class _Forms(html.parser.HTMLParser):
    """The forms of a page: action, method and the inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.forms.append(
                {"action": a.get("action") or "", "method": a.get("method") or "get", "fields": {}}
            )
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value") or ""


def _forms(text: str) -> list[dict[str, Any]]:
    parser = _Forms()
    parser.feed(text)
    return parser.forms


class Person:
    """Someone at a browser who logs in on the stand-in's pages (any login, any password),
    over plain HTTP as a browser would: cookies, redirects, forms (≈50 ms a login)."""

    def __init__(self, entra: Entra, user: str = "alice") -> None:
        self.entra = entra
        self.user = user
        self.pages: list[str] = []
        """Every URL this person was sent to."""

    def _walk(self, s: Any, response: Any) -> Any:
        """Follow redirects and fill the login and consent forms until a page leaves the
        stand-in (the loopback redirect) or nothing more can be done; the last response."""
        for _ in range(12):
            if response.is_redirect:
                target = urllib.parse.urljoin(response.url, response.headers["Location"])
                self.pages.append(target)
                if not target.startswith(self.entra.base):
                    return s.get(target, allow_redirects=False, timeout=10)
                response = s.get(target, allow_redirects=False, timeout=10)
                continue
            forms = _forms(response.text)
            if not forms:
                return response
            form = forms[0]
            fields = dict(form["fields"])
            if "login" in fields:
                fields.update(login=self.user, password="any")
            action = urllib.parse.urljoin(response.url, form["action"])
            self.pages.append(action)
            if not action.startswith(self.entra.base):  # form_post to the loopback
                import requests

                return requests.post(action, data=fields, allow_redirects=False, timeout=10)
            response = s.post(action, data=fields, allow_redirects=False, timeout=10)
        return response

    def open(self, url: str) -> Any:
        """A browser opened on ``url`` (the authorize URL): log in, come back to the app."""
        self.pages.append(url)
        with self.entra._session() as s:
            return self._walk(s, s.get(url, allow_redirects=False, timeout=10))

    def enter_code(self, verification_uri: str, user_code: str) -> Any:
        """The device code page: type the code, confirm, log in."""
        with self.entra._session() as s:
            page = s.get(verification_uri, timeout=10)
            form = _forms(page.text)[0]
            action = urllib.parse.urljoin(page.url, form["action"])
            response = s.post(
                action,
                data={**form["fields"], "user_code": user_code},
                allow_redirects=False,
                timeout=10,
            )
            return self._walk(s, response)


def aks_accepts(entra: Entra, server_id: str = AKS_SERVER) -> Callable[[str], bool]:
    """What an AKS API server accepts (guard, aks-gke.md §B.10): a JWT the tenant signed (keys
    from the v1 metadata's jwks_uri), ``iss`` the tenant's v1 issuer, ``aud`` the server id,
    not expired; the user is its ``upn`` (or ``oid``). joserfc: not the library kubetray uses."""
    from joserfc import jwt
    from joserfc.jwk import KeySet

    metadata = entra.get(f"/{entra.tenant}/.well-known/openid-configuration")
    path = urllib.parse.urlsplit(metadata["jwks_uri"]).path
    keys = KeySet.import_key_set(entra.get(path))
    issuer = metadata["issuer"]

    def check(token: str) -> bool:
        try:
            claims = jwt.decode(token, keys).claims
        except Exception:
            return False
        return bool(
            claims.get("iss") == issuer
            and claims.get("aud") == server_id
            and claims.get("ver") == "1.0"
            and claims["exp"] > time.time()
            and (claims.get("upn") or claims.get("oid"))
        )

    return check


def decode(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (for assertions about what was served)."""
    import base64

    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


class PersonAtUI:
    """What kubetray's login shows, with a person in front of it: the browser URL is opened
    and logged in by ``person``, a device code is typed in on the device page."""

    def __init__(self, person: Person | None, prompt: str = "") -> None:
        import threading

        self.person = person
        self.cancelled = threading.Event()
        self.auth_params: dict[str, str] = {}
        self.browser_available = True
        self.lines: list[str] = []
        self.codes: list[tuple[str, str]] = []
        self.opened: list[str] = []
        self._threads: list[threading.Thread] = []
        if prompt:
            self.auth_params["prompt"] = prompt

    def _later(self, fn: Callable[..., Any], *args: Any) -> None:
        import threading

        t = threading.Thread(target=fn, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def show(self, text: str) -> None:
        self.lines.append(text)

    def open_browser(self, url: str) -> bool:
        self.opened.append(url)
        if self.person is not None and "/oauth2/deviceauth" not in url:
            self._later(self.person.open, url)
        return True

    def prompt(self, text: str, secret: bool) -> str | None:
        return None

    def show_device_code(self, user_code: str, uri: str) -> None:
        self.codes.append((user_code, uri))
        if self.person is not None:
            self._later(self.person.enter_code, uri, user_code)


FAKE_TOOL = '''#!{python}
"""A stand-in for `{name}`, from its documented command line and output (azure-cli's
`az account get-access-token`, azd's `azd auth token`; azure-identity parses the same). Its
"login" is a service principal of the Entra stand-in: the token it prints is real there."""
import json, os, sys, urllib.parse, urllib.request, ssl
state = {state!r}
with open(os.path.join(state, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "AZURE_CONFIG_DIR": os.environ.get("AZURE_CONFIG_DIR")}}) + "\\n")
if not os.path.exists(os.path.join(state, "logged-in")):
    print({not_logged_in!r}, file=sys.stderr)
    sys.exit(1)
args = sys.argv[1:]
scope = args[args.index("--resource") + 1] + "/.default" if "--resource" in args else args[args.index("--scope") + 1]
body = urllib.parse.urlencode({{"grant_type": "client_credentials", "client_id": {client_id!r},
    "client_secret": {secret!r}, "scope": scope}}).encode()
ctx = ssl.create_default_context(cafile={ca!r})
with urllib.request.urlopen({token_url!r}, body, context=ctx) as r:
    doc = json.load(r)
import time, datetime
end = int(time.time()) + int(doc["expires_in"])
if {name!r} == "az":
    print(json.dumps({{"accessToken": doc["access_token"], "expiresOn": datetime.datetime.fromtimestamp(end).strftime("%Y-%m-%d %H:%M:%S.%f"),
        "expires_on": end, "subscription": "sub", "tenant": {tenant!r}, "tokenType": "Bearer"}}, indent=2))
else:
    print(json.dumps({{"token": doc["access_token"], "expiresOn": datetime.datetime.fromtimestamp(end, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}}))
'''


def fake_tool(entra: Entra, name: str, where: Path) -> Path:
    """Install a stand-in `az` or `azd` in ``where`` (a directory for PATH); returns the
    directory holding its state: ``logged-in`` (touch it to log in) and ``calls.jsonl``."""
    import sys

    state = where / f"{name}-state"
    state.mkdir(parents=True, exist_ok=True)
    not_logged_in = (
        "ERROR: Please run 'az login' to setup account."
        if name == "az"
        else "ERROR: fetching token: not logged in, run `azd auth login` to login"
    )
    script = where / name
    script.write_text(
        FAKE_TOOL.format(
            python=sys.executable,
            name=name,
            state=str(state),
            not_logged_in=not_logged_in,
            client_id=entra.sp_secret["client_id"],
            secret=entra.sp_secret["client_secret"],
            ca=str(entra.ca_file),
            token_url=f"{entra.authority}/oauth2/v2.0/token",
            tenant=entra.tenant,
        )
    )
    script.chmod(0o755)
    return state
