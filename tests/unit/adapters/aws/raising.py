"""A boto3 client double whose every call raises one error (``Raising``: the real client's failure modes, without the
network) and the ``ClientError`` botocore raises for an error answer (``client_error``)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError


class Raising:
    """A client whose every call fails with ``error`` (the real client's failure modes, without the network)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(**_: Any) -> Any:
            raise self.error

        return call


def client_error(code: str, message: str = "", status: int = 400, operation: str = "Op") -> ClientError:
    """The error botocore raises for an answer of ``code`` (HTTP ``status``) to ``operation``."""
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )
