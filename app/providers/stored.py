"""Stored credentials (``--stored NAME``) as a provider: a name, and nothing to log in to.

The broker serves them from app.static_credentials (no login, no refresh: what ``kubetray
store`` put in the keyring, as it is); this provider only says which one a request names.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from app import identity
from app.errors import AppError
from app.model import STORED
from app.providers.base import NOBODY, Check, Clock, Converted, Shown, TokenSet, Wanted
from app.static_credentials import check_name
from exec_helper.options import HelperOptions


@dataclass(frozen=True)
class StoredSettings:
    """A stored credential's name (the whole of its settings)."""

    kind: ClassVar[str] = STORED
    name: str

    @property
    def key(self) -> str:
        return identity.stored_key(self.name)

    @property
    def fallback_name(self) -> str:
        return self.name

    named_by_kubeconfig: ClassVar[bool] = False
    machine: ClassVar[bool] = True
    can_fetch: ClassVar[bool] = False
    login_needs: ClassVar[str] = NOBODY
    browser_command: ClassVar[str | None] = None
    group: ClassVar[str] = ""
    where: ClassVar[str] = "the keyring"
    ca_files: ClassVar[tuple[str, ...]] = ()

    def to_index(self) -> dict[str, Any]:
        return {"name": self.name}


class StoredProvider:
    """``--stored NAME`` among kubetray-exec's own flags."""

    kind = STORED
    usage = "--stored NAME"

    def recognises(self, args: Sequence[str]) -> bool:
        return False  # kubetray's own flags: the registry reads them once for stored and OIDC

    def from_options(self, opts: HelperOptions) -> Wanted | None:
        if not opts.stored:
            return None
        check_name(opts.stored)  # before it names anything the agent keeps
        return Wanted(StoredSettings(opts.stored), None, opts.force_refresh, opts.no_login)

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        from exec_helper import options

        found = self.from_options(options.resolve(list(args), dict(config or {}), dict(env)))
        if found is None:
            raise AppError("no --stored NAME given")
        return found

    def from_index(self, doc: Mapping[str, Any]) -> StoredSettings:
        return StoredSettings(check_name(str(doc["name"])))

    def client(self, settings: Any, clock: Clock) -> Any:
        raise AppError(f"{settings.name} is a stored credential: nothing to log in to")

    def token(self, settings: Any, tokens: TokenSet, cluster: str | None) -> str | None:
        return None

    def renewable(self, settings: Any, tokens: TokenSet) -> bool:
        return False

    def describe(self, settings: Any, tokens: TokenSet | None) -> Shown:
        return Shown()

    def note(self, settings: Any, tokens: TokenSet | None) -> str | None:
        return None

    def checks(self, settings: Any, now: Clock) -> Iterator[Check]:
        return iter(())

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        return None
