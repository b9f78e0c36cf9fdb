"""Who a direct invocation says it is (``direct_caller``), as the CLI sends it (``cli.invoke.client_context``)."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

from cli.invoke import client_context, lambda_invoker
from lambdas.common.handler import direct_caller

OPERATOR = "arn:aws:sts::111122223333:assumed-role/node-manager-operator/alice"


class Recording:
    """A Lambda client that records Invoke's arguments."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def invoke(self, **kwargs):  # type: ignore[no-untyped-def]  # boto3's shape
        self.calls.append(kwargs)
        return {"Payload": SimpleNamespace(read=lambda: b'{"status": "idle"}')}


def test_the_cli_names_its_caller_in_the_client_context_and_the_function_reads_it() -> None:
    client = Recording()
    assert lambda_invoker("refresher", client, OPERATOR)({"action": "status", "cluster": "c"}) == {"status": "idle"}
    (call,) = client.calls
    custom = json.loads(base64.b64decode(call["ClientContext"]))["custom"]
    # what Lambda hands the function: context.client_context.custom
    assert direct_caller(SimpleNamespace(client_context=SimpleNamespace(custom=custom))) == OPERATOR


def test_no_caller_no_client_context() -> None:
    client = Recording()
    lambda_invoker("refresher", client)({"action": "status", "cluster": "c"})
    assert "ClientContext" not in client.calls[0] and client_context(None) is None


def test_eventbridge_invocations_and_odd_contexts_name_no_caller() -> None:
    assert direct_caller(None) is None
    assert direct_caller(SimpleNamespace(client_context=None)) is None
    assert direct_caller(SimpleNamespace(client_context=SimpleNamespace(custom=["x"]))) is None
    assert direct_caller(SimpleNamespace(client_context=SimpleNamespace(custom={"caller": "x" * 1000}))) == "x" * 256
