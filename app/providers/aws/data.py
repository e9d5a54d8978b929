"""botocore's own data files, read from the installation the agent started from.

botocore reads JSON files beside its modules for every session it makes (the agent makes one
per caller's AWS world, and more for an assumed role): the endpoints, partitions and defaults,
and the models of the services it calls (STS, IAM Identity Center). An upgrade replaces those
files under a running agent, and a removal deletes them: its next AWS login then failed with
"Unable to load data for: endpoints". The packaged agent keeps them open from its start
(app/frozen.py: DATA), and ``StartedWith`` reads botocore's data from there: the same files
whatever happened to the installation since, until the agent restarts into the new one.

The CA bundle botocore verifies AWS with by itself (certifi's, beside the modules too) is
pinned the same way; trust.py gives it to botocore where it stands in for the system's CAs (no
system CA file), with AWS_CA_BUNDLE / ``ca_bundle`` added. A development install pins nothing:
botocore reads its files itself.
"""

import contextlib
import gzip
import json
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar, cast

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader, instance_cache

from app import frozen

_EXTENSIONS = (".json", ".json.gz")
_F = TypeVar("_F", bound=Callable[..., Any])


def _cached(fn: _F) -> _F:
    """botocore's per-loader memo (untyped)."""
    return cast(_F, instance_cache(fn))


def _strip(name: str) -> str | None:
    for ext in _EXTENSIONS:
        if name.endswith(ext):
            return name[: -len(ext)]
    return None


class StartedWith(Loader):  # type: ignore[misc]
    """botocore's Loader whose built-in data (``BUILTIN_DATA_PATH``) comes from the files the
    process pinned at start; the data paths a person adds (AWS_DATA_PATH, ~/.aws/models) are
    searched first, from disk, as botocore does."""

    def __init__(self, pinned: list[str], extra_search_paths: list[str] | None = None) -> None:
        super().__init__(
            extra_search_paths=[*(extra_search_paths or []), self.CUSTOMER_DATA_PATH],
            include_default_search_paths=False,
        )
        self._builtin = {stem for p in pinned if (stem := _strip(p)) is not None}
        """Data names (``sts/2011-06-15/service-2``, ``endpoints``) the pinned files hold."""

    def _versions(self, service_name: str, type_name: str) -> set[str]:
        found = set()
        for name in self._builtin:
            parts = name.split("/")
            if len(parts) == 3 and parts[0] == service_name and parts[2] == type_name:
                found.add(parts[1])
        return found

    @_cached
    def list_available_services(self, type_name: str) -> list[str]:
        services = set(super().list_available_services(type_name))
        for name in self._builtin:
            parts = name.split("/")
            if len(parts) == 3 and parts[2] == type_name:
                services.add(parts[0])
        return sorted(services)

    @_cached
    def list_api_versions(self, service_name: str, type_name: str) -> list[str]:
        versions = self._versions(service_name, type_name)
        with contextlib.suppress(DataNotFoundError):  # nothing in a person's data paths
            versions.update(super().list_api_versions(service_name, type_name))
        if not versions:
            raise DataNotFoundError(data_path=service_name)
        return sorted(versions)

    @_cached
    def load_data_with_path(self, name: str) -> tuple[Any, str]:
        try:
            return super().load_data_with_path(name)  # type: ignore[no-any-return]
        except DataNotFoundError:
            if name not in self._builtin:
                raise
        for ext in _EXTENSIONS:
            path = os.path.join(self.BUILTIN_DATA_PATH, name)
            raw = frozen.read_data(path + ext)
            if raw is None:
                continue
            if ext.endswith(".gz"):
                raw = gzip.decompress(raw)
            return json.loads(raw.decode("utf-8"), object_pairs_hook=OrderedDict), path
        raise DataNotFoundError(data_path=name)


def loader(data_path: str | None) -> Loader | None:
    """The loader for a session whose ``data_path`` setting is ``data_path`` (botocore's
    create_loader), or None when nothing was pinned (botocore's own then)."""
    pinned = frozen.pinned_under(Loader.BUILTIN_DATA_PATH)
    if not pinned:
        return None
    extra = None
    if data_path:
        extra = [os.path.expanduser(os.path.expandvars(p)) for p in data_path.split(os.pathsep)]
    return StartedWith(pinned, extra)


def ca_bundle() -> str | None:
    """The CA bundle botocore would verify with (certifi's), as pinned at start; None when it
    was not pinned (botocore finds its own)."""
    try:
        import certifi
    except ImportError:
        return None
    bundle = certifi.where()
    pinned = frozen.data_path(bundle)
    return pinned if pinned != bundle else None
