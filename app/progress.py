"""Progress of a long use case (``secure --all`` over hundreds of kubeconfig files), reported
to whoever shows it: the CLI draws it on stderr; nothing else needs to."""

from typing import Protocol


class Progress(Protocol):
    def __call__(self, step: str, done: int, total: int, item: str) -> None:
        """``done`` of ``total`` steps of one kind (``stored``, ``wrote`` ...) are over; the last
        was about ``item`` (a file, a credential's name: never a secret)."""


def quiet(step: str, done: int, total: int, item: str) -> None:
    """Progress nobody is shown."""
