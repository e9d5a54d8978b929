"""app/jsonfile.py: a file that does not parse is kept aside, never replaced; one that cannot
be read is refused and never written over."""

from pathlib import Path

import pytest

from app import formats, jsonfile


def test_damaged_twice_in_one_second_keeps_both_copies(tmp_path: Path) -> None:
    path = tmp_path / "remote-hosts.json"
    copies = []
    for damaged in (b'{"allow": ["a.example"', b"[1, 2, 3]"):  # cut short; not an object
        path.write_bytes(damaged)
        assert jsonfile.load(str(path)) is None
        assert not path.exists()
        copies.append(damaged)
    kept = [p for _, p in jsonfile.set_aside([str(path)])]
    assert sorted(Path(p).read_bytes() for p in kept) == sorted(copies)
    formats.save(str(path), {"allow": []}, 1)  # a new one beside the copies
    assert sorted(Path(p).read_bytes() for p in kept) == sorted(copies)
    notice = jsonfile.aside_notice(str(path), kept[0]).one_line()
    assert notice.startswith(
        f"remote-hosts.json could not be read (it is not JSON) and was kept as {kept[0]}"
    )


def test_a_file_that_cannot_be_read_is_not_written_over(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig-backups.json"
    path.mkdir()
    with pytest.raises(jsonfile.Unreadable) as refused:
        formats.save(str(path), {"backups": []}, 1)
    assert refused.value.one_line() == (
        f"kubetray cannot read {path} (it is a directory) and leaves it as it is; move the "
        f"directory {path} away, then try again"
    )
    assert path.is_dir()
