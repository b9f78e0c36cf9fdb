"""EventBridge: the agent's command results on the event bus. Thin; errors translated by ``adapters.aws.calls``."""

from __future__ import annotations

from typing import Any

from adapters.aws.calls import call
from adapters.aws.ports import Rejection


class EventBus:
    """PutEvents on one bus.

    Args:
        client: a boto3 ``events`` client (or an ``adapters.aws.clients.LazyClient``).
        bus_name: name or ARN of the bus.
    """

    def __init__(self, client: Any, bus_name: str) -> None:
        self.client = client
        self.bus_name = bus_name

    def put(self, source: str, detail_type: str, detail: str) -> Rejection | None:
        """PutEvents of one entry (``detail`` is the JSON text); None when accepted, else why it was rejected.

        Raises:
            AwsUnavailableError, AwsRequestError: the call itself failed.
        """
        entry = {"Source": source, "DetailType": detail_type, "Detail": detail, "EventBusName": self.bus_name}
        out = call("PutEvents", self.client.put_events, Entries=[entry])
        if not out.get("FailedEntryCount", 0):
            return None
        failed = (out.get("Entries") or [{}])[0]
        return Rejection(str(failed.get("ErrorCode")), str(failed.get("ErrorMessage")))
