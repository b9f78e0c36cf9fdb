"""A recording double of the AWS ports and metrics the refresher's executor uses (``Recorder``) and a recorder of
the table calls (``table_calls``): the shared setup of ``test_execute`` and ``test_passing_bound`` (their table,
``store``, is the fixture of ``conftest``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from adapters.dynamo.store import Store

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
RUN_ID = "20240305T100000Z-abcdef"


class Recorder:
    """What the executor asked of AWS and of the metrics."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.autoscaling = SimpleNamespace(
            set_capacity=lambda name, desired, max_size: self.calls.append(("set_capacity", name)),
            terminate_in_group=lambda instance_id, decrement: self.calls.append(("terminate", instance_id)) or True,
            cluster_groups=lambda cluster: [],
        )
        self.ec2 = SimpleNamespace(launch_times=lambda ids: {}, describe=lambda ids: {})
        self.queue = SimpleNamespace(send_command=lambda c: self.calls.append(("send", c.command_id)) or "m-1")

    def count(self, name: str, value: int = 1) -> None:
        self.calls.append(("metric", name))

    def seconds(self, name: str, value: float) -> None:
        self.calls.append(("metric", name))


def table_calls(store: Store) -> list[tuple[str, list[str]]]:
    """(operation, sort keys written) of every call on the store's table from now on."""
    calls: list[tuple[str, list[str]]] = []

    def record(model: Any, params: Any, **_: Any) -> None:
        body = json.loads(params["body"] or b"{}")  # the request as sent: DynamoDB JSON
        entries = body.get("TransactItems") or [{model.name: body}]
        keys = [(b.get("Key") or b.get("Item") or {}).get("sk", {}).get("S") for e in entries for b in e.values()]
        calls.append((model.name, [k for k in keys if k]))

    store.table.meta.client.meta.events.register("before-call.dynamodb", record)
    return calls
