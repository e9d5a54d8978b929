"""A minimal edit of a kubeconfig's text: only the ``user:`` bodies that change are rewritten.

An undo must put a file back as the person keeps it. When the file is still as kubetray wrote
it, the backup's bytes go back (app.kubeconfig.edit); when someone changed it since, only the
users kubetray changed get their old bodies back, in place, and every other byte of the file
(comments, quoting, folded scalars, key order, blank lines) stays as it is. This module finds
each user's body in the text by the YAML parser's own marks and replaces that span alone; the
result is parsed again and used only when it reads exactly as the structured edit would.
"""

import json
from typing import Any

import yaml

from app.kubeconfig import files


def patched(
    text: str,
    before: dict[str, Any],
    after: dict[str, Any],
    verbatim: dict[str, str] | None = None,
) -> str | None:
    """``text`` (which parses as ``before``) with only its users' bodies changed so that it
    parses as ``after``; None when that cannot be done by such spans (something else changed,
    an alias, several documents), and the caller then writes the whole file. ``verbatim``:
    bodies by user as text (what ``user_texts`` took before), used where they still fit."""
    if verbatim:
        out = _patched(text, before, after, verbatim)
        if out is not None:
            return out
    return _patched(text, before, after, {})


def user_texts(text: str, names: set[str]) -> dict[str, str]:
    """The users' bodies as ``text`` spells them (for an undo to put back)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    out = {}
    for name, node in (_user_spans(root, names) or {}).items():
        start, end = node.start_mark.index, node.end_mark.index
        if _is_block(node):
            end = _content_end(text, start, end)
        out[name] = text[start:end]
    return out


def _is_block(node: yaml.Node) -> bool:
    return isinstance(node, yaml.MappingNode | yaml.SequenceNode) and not node.flow_style


def _patched(
    text: str, before: dict[str, Any], after: dict[str, Any], verbatim: dict[str, str]
) -> str | None:
    changed = _changed_users(before, after)
    if changed is None:
        return None
    if not changed:
        return text if before == after else None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)  # marks count characters of ``text``
    except yaml.YAMLError:
        return None
    spans = _user_spans(root, set(changed))
    if spans is None or set(spans) != set(changed):
        return None
    newline = "\r\n" if "\r\n" in text else "\n"
    out = text
    # from the end, so that earlier marks still point where they did
    for name, node in sorted(spans.items(), key=lambda item: -item[1].start_mark.index):
        start, end = node.start_mark.index, node.end_mark.index
        block = _is_block(node)
        if block:
            end = _content_end(out, start, end)
        if name in verbatim:
            body = verbatim[name]
        elif block:
            body = _block(changed[name], node.start_mark.column, newline)
        else:  # a flow mapping, a scalar (null, {}), or JSON: one line in flow style
            body = json.dumps(changed[name], ensure_ascii=False)
        ends_line = out[start:end].endswith(("\n", "\r"))
        if block and not ends_line:
            body = body.rstrip("\r\n")
        elif ends_line and not body.endswith("\n"):
            body += newline
        out = out[:start] + body + out[end:]
    try:
        ok = files.parse("", out) == after
    except files.KubeconfigError:
        ok = False
    return out if ok else None


def _changed_users(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """The users whose body differs, by name (None: anything else differs too)."""
    strip = {k: v for k, v in before.items() if k != "users"}
    if strip != {k: v for k, v in after.items() if k != "users"}:
        return None
    old, new = before.get("users"), after.get("users")
    if not isinstance(old, list) or not isinstance(new, list) or len(old) != len(new):
        return None if old != new else {}
    changed: dict[str, Any] = {}
    for a, b in zip(old, new, strict=True):
        if a == b:
            continue
        if not (isinstance(a, dict) and isinstance(b, dict)) or a.get("name") != b.get("name"):
            return None
        if {k: v for k, v in a.items() if k != "user"} != {
            k: v for k, v in b.items() if k != "user"
        }:
            return None
        name = a.get("name")
        if not isinstance(name, str) or name in changed:
            return None
        changed[name] = b.get("user")
    return changed


def _user_spans(root: yaml.Node | None, names: set[str]) -> dict[str, yaml.Node] | None:
    if not isinstance(root, yaml.MappingNode):
        return None
    users = next((v for k, v in root.value if getattr(k, "value", None) == "users"), None)
    if not isinstance(users, yaml.SequenceNode):
        return None
    spans: dict[str, yaml.Node] = {}
    for item in users.value:
        if not isinstance(item, yaml.MappingNode):
            continue
        keys = {getattr(k, "value", None): v for k, v in item.value}
        name = getattr(keys.get("name"), "value", None)
        if name in names and name not in spans and "user" in keys:
            spans[name] = keys["user"]
    return spans


def _content_end(text: str, start: int, end: int) -> int:
    """``end`` moved back over the blank and comment-only lines a block node's span ends with
    (they belong to what follows, and stay)."""
    lines = text[start:end].splitlines(keepends=True)
    while len(lines) > 1 and (not lines[-1].strip() or lines[-1].lstrip().startswith("#")):
        lines.pop()
    return start + sum(len(line) for line in lines)


def _block(body: Any, column: int, newline: str) -> str:
    """``body`` in block style for a node that starts at ``column`` (its first line goes where
    the old one began; the others are indented to that column)."""
    lines = files.render({"x": body}).splitlines()[1:]  # as files renders a user body
    if not lines:
        return json.dumps(body) + newline
    indent = len(lines[0]) - len(lines[0].lstrip(" "))
    pad = " " * column
    out = [line[indent:] if i == 0 else pad + line[indent:] for i, line in enumerate(lines)]
    return newline.join(out) + newline
