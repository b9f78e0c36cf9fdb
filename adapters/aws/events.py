"""EventBridge: the agent's command results and "Node Ready" reports on the event bus. Thin; errors translated by
``adapters.aws.calls``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.aws.calls import call
from adapters.aws.ports import Rejection

MAX_ENTRIES = 10  # PutEvents' limit of entries per call (Amazon EventBridge API Reference, PutEvents)


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

    def put_many(self, entries: Sequence[tuple[str, str, str]]) -> list[Rejection | None]:
        """One PutEvents of up to ``MAX_ENTRIES`` entries, each (source, detail-type, detail JSON text); per entry,
        in order, None when accepted, else why it was rejected (PutEvents answers entry by entry: "Amazon
        EventBridge API Reference", PutEvents, ``Entries`` of the response match the request's by position).

        Raises:
            ValueError: more than ``MAX_ENTRIES`` entries (PutEvents' own limit).
            AwsUnavailableError, AwsRequestError: the call itself failed.
        """
        if len(entries) > MAX_ENTRIES:
            raise ValueError(f"PutEvents takes at most {MAX_ENTRIES} entries, got {len(entries)}")
        if not entries:
            return []
        request = [
            {"Source": source, "DetailType": detail_type, "Detail": detail, "EventBusName": self.bus_name}
            for source, detail_type, detail in entries
        ]
        out = call("PutEvents", self.client.put_events, Entries=request)
        answers = list(out.get("Entries") or [])
        answers += [{}] * (len(request) - len(answers))
        return [
            Rejection(str(a.get("ErrorCode")), str(a.get("ErrorMessage"))) if a.get("ErrorCode") else None
            for a in answers[: len(request)]
        ]
