"""A boto3 client double whose every call raises one error: the real client's failure modes, without the network."""

from __future__ import annotations

from typing import Any


class Raising:
    """A client whose every call fails with ``error`` (the real client's failure modes, without the network)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(**_: Any) -> Any:
            raise self.error

        return call
