"""Who is calling: the helper's process and its parents, for the record of calls."""

import sys

from app.model import Caller

MAX_PARENTS = 4


def _linux_name_and_parent(pid: int) -> tuple[str | None, int | None]:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None, None
    # "pid (comm) state ppid ..." where comm may itself contain spaces and parentheses
    start, end = stat.find("("), stat.rfind(")")
    if start < 0 or end < 0:
        return None, None
    rest = stat[end + 2 :].split()
    return stat[start + 1 : end], int(rest[1]) if len(rest) > 1 else None


def describe(pid: int | None) -> Caller:
    """The caller's name and its parents' names (Linux /proc; pid only elsewhere)."""
    if pid is None or sys.platform != "linux":
        return Caller(pid=pid)
    name, parent = _linux_name_and_parent(pid)
    parent_pid = parent
    parents: list[str] = []
    while parent and parent > 1 and len(parents) < MAX_PARENTS:
        parent_name, parent = _linux_name_and_parent(parent)
        if parent_name is None:
            break
        parents.append(parent_name)
    return Caller(pid=pid, name=name, parents=tuple(parents), parent_pid=parent_pid)
