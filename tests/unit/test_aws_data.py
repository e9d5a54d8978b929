"""botocore's data read from the files pinned at start (app/providers/aws/data.py): a packaged
agent whose installation was replaced or removed still makes AWS clients and signs tokens."""

import os
import shutil
from pathlib import Path

import botocore.loaders
import pytest
from botocore.exceptions import UnknownServiceError

from app import frozen
from app.providers.aws import data
from app.providers.aws.session import CallerSession

REAL = Path(botocore.loaders.Loader.BUILTIN_DATA_PATH)


@pytest.fixture
def pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bundle's botocore data, pinned as frozen.pin() does, then deleted."""
    root = tmp_path / "_internal"
    copy = root / "botocore" / "data"
    copy.mkdir(parents=True)
    for f in REAL.glob("*.json"):
        shutil.copy(f, copy)
    shutil.copytree(REAL / "sts", copy / "sts")
    monkeypatch.setattr(frozen.sys, "_MEIPASS", str(root), raising=False)
    monkeypatch.setattr(frozen, "_data", {})
    monkeypatch.setattr(botocore.loaders.Loader, "BUILTIN_DATA_PATH", str(copy))
    assert frozen._pin_data() > 5
    yield copy
    for fd in frozen._data.values():
        os.close(fd)


def test_a_session_signs_from_the_pinned_data_once_the_files_are_gone(pinned: Path) -> None:
    shutil.rmtree(pinned)
    session = CallerSession({})
    assert isinstance(session.get_component("data_loader"), data.StartedWith)
    keys = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}
    sts = session.create_client("sts", region_name="eu-west-1", **keys)
    url = sts.generate_presigned_url("get_caller_identity", ExpiresIn=60)
    assert url.startswith("https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity")
    with pytest.raises(UnknownServiceError):  # only what was pinned: never the new files
        session.create_client("eks", region_name="eu-west-1", **keys)


def test_a_person_s_data_path_still_comes_first(pinned: Path, tmp_path: Path) -> None:
    mine = tmp_path / "models"
    (mine / "sts" / "2011-06-15").mkdir(parents=True)
    (mine / "sts" / "2011-06-15" / "paginators-1.json").write_text('{"pagination": {"x": 1}}')
    session = CallerSession({"AWS_DATA_PATH": str(mine)})
    loader = session.get_component("data_loader")
    assert loader.load_data("sts/2011-06-15/paginators-1") == {"pagination": {"x": 1}}
    assert "partitions" in loader.load_data("partitions")  # the pinned one


def test_a_development_install_uses_botocore_s_own_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frozen, "_data", {})
    session = CallerSession({})
    assert type(session.get_component("data_loader")) is botocore.loaders.Loader
    assert session.get_config_variable("ca_bundle") is None
