"""Formats of what kubetray keeps: every version reads what the others wrote, or says why not.

Each file and keyring document carries a format number: ``"version": N`` in JSON documents
(with ``"kubetray"``, the version that wrote it), a prefix in keyring items (``inline:``,
``sealed:``; a later format would be ``inline.v2:``). The rules, for every reader:

* Fields a reader does not know are ignored and kept: what it writes back carries them, so a
  newer kubetray finds its own fields again after an older one rewrote the file.
* A newer format (an incompatible change bumps the number; a new field does not) is refused in
  one line that names both versions, and the file is neither rewritten nor removed.
* A document without a number is format 1. kubetray 0.1.0 read its token sets, stored
  credentials, undo records and backup records strictly (any unknown field failed every call),
  so these stay, in format 1, exactly as 0.1.0 wrote them, without a number: a downgrade to
  0.1.0 keeps working. Their first new format will carry its number (which 0.1.0 cannot read,
  and never could).

tests/formats/ holds what each release wrote (``python -m tests.formats.write``), and
tests/unit/test_formats.py loads them, and a made-up newer version, with this version's readers.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from app import jsonfile
from app.errors import AppError
from exec_helper.version import VERSION

FIELD = "version"
WRITER = "kubetray"
"""The kubetray version that wrote a document (so a refusal can name it)."""


class NewerFormat(AppError):
    """A document in a format this kubetray cannot read: written by a newer one."""


def number(doc: Mapping[str, Any]) -> int:
    """The format of ``doc``: its number, 1 without one (or with one that is not a number)."""
    value = doc.get(FIELD, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def check(doc: Mapping[str, Any], what: str, readable: int) -> int:
    """The format of ``doc``, or NewerFormat when it is newer than ``readable``."""
    found = number(doc)
    if found > readable:
        raise newer(what, found, readable, doc.get(WRITER))
    return found


def newer(what: str, found: int, readable: int, writer: object = None) -> NewerFormat:
    by = f"kubetray {writer}" if isinstance(writer, str) and writer else "a newer kubetray"
    return NewerFormat(
        f"{what} was written by {by} (format {found}); this kubetray {VERSION} reads up to "
        f"format {readable}",
        "upgrade kubetray to read it (kubetray left it as it is)",
    )


def stamped(doc: Mapping[str, Any], fmt: int) -> dict[str, Any]:
    """``doc`` with its format and the version writing it (for JSON files, which every
    version reads leniently at the top)."""
    return {**doc, FIELD: fmt, WRITER: VERSION}


def save(path: str, doc: Mapping[str, Any], fmt: int) -> None:
    """Write ``doc`` to the JSON file ``path``, stamped with format ``fmt``, keeping the fields
    of a newer kubetray that the file holds (OSError when it cannot be written)."""
    old = jsonfile.load(path)
    kept = unknown(old, doc) if isinstance(old, dict) else {}
    jsonfile.save(path, stamped({**kept, **doc}, fmt))


def unknown(doc: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The fields of ``doc`` a reader does not know (kept, to be written back)."""
    names = {*known, FIELD, WRITER}
    return {k: v for k, v in doc.items() if k not in names}
