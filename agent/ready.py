"""The agent's "Node Ready" reports: nodes that became Ready, batched into EventBridge events, so a refresh run that
waits for a node wakes up when it is Ready instead of polling for it.

A node *becomes Ready* when the membership reporter writes its ``NODE#`` item Ready while the item it replaces was
NotReady or absent (``became_ready``): a spare that registered and turned Ready, a master back after its replacement,
a node that recovered. The report is sent after that write, so a reader woken by it finds the item Ready. The agent
does not know which instances a run waits on (its role does not read ``RUN#``): it reports every node that becomes
Ready, and the refresher keeps the ones of its active run (``lambdas/refresher/service.py``).

Batching and rate: ``ReadyReporter.note`` keeps the node (the latest record per instance); ``flush``, called every
``READY_EVENT_SECONDS`` by ``run`` (and after each resync), sends what was kept: up to ``MAX_NODES_PER_EVENT`` nodes
per event and up to 10 events per PutEvents call (EventBridge's limit), so at most one call per period unless more
than 500 nodes became Ready in it (a new agent's first resync on an unrecorded cluster). An event EventBridge refused,
or a call that failed, is logged and dropped: the report is only a hint, and the refresher's slow poll and its tick
find the node Ready anyway.

EventBridge event (``PutEvents`` entry on ``EVENT_BUS_NAME``; the refresher parses it in
``lambdas/events/node_ready.py``)::

    Source      node-manager.agent
    DetailType  "Node Ready"
    Detail      {"cluster": "demo.k8s.local",
                 "nodes": [{"instance_id": "i-0abc...", "node_name": "ip-10-0-1-17.ec2.internal",
                            "asg_name": "nodes-us-east-1a.demo.k8s.local"}]}   (asg_name null when unknown)
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from adapters.aws.events import MAX_ENTRIES, EventBus
from core.exceptions import AwsRequestError, AwsUnavailableError
from core.model import NodeRecord

log = logging.getLogger(__name__)

EVENT_SOURCE = "node-manager.agent"  # the agent's one source (its role may put no other: infra/permissions.py)
DETAIL_TYPE = "Node Ready"
MAX_NODES_PER_EVENT = 50  # the refresher refuses more (lambdas.events.node_ready.MAX_NODES)


def became_ready(previous: NodeRecord | None, record: NodeRecord) -> bool:
    """Whether writing ``record`` over ``previous`` (None: no item) makes the node Ready. Pure."""
    return record.ready and (previous is None or not previous.ready)


def ready_details(cluster: str, records: Sequence[NodeRecord]) -> Iterator[dict[str, Any]]:
    """The ``Detail`` of each event reporting ``records``, ``MAX_NODES_PER_EVENT`` nodes each. Pure."""
    for start in range(0, len(records), MAX_NODES_PER_EVENT):
        yield {
            "cluster": cluster,
            "nodes": [
                {"instance_id": r.instance_id, "node_name": r.node_name, "asg_name": r.asg_name}
                for r in records[start : start + MAX_NODES_PER_EVENT]
            ],
        }


class ReadyReporter:
    """Keeps the nodes that became Ready and sends them as "Node Ready" events (module docstring).

    Args:
        bus: PutEvents on the agent's bus (``adapters.aws.events.EventBus``).
        cluster: the cluster's name (``detail.cluster``; the refresher's rule matches on it).
        interval_seconds: the period of ``run``'s flushes (``READY_EVENT_SECONDS``).
        on_sent: told the number of nodes of each flush EventBridge accepted (metrics); must not raise.

    Thread-safe: the membership thread notes, the reporter's own thread flushes.
    """

    def __init__(
        self,
        bus: EventBus,
        cluster: str,
        interval_seconds: float = 1.0,
        on_sent: Callable[[int], None] | None = None,
    ) -> None:
        self.bus = bus
        self.cluster = cluster
        self.interval_seconds = interval_seconds
        self.on_sent = on_sent
        self._pending: dict[str, NodeRecord] = {}
        self._lock = threading.Lock()
        self.sent = 0  # nodes reported, for tests and logs
        self.dropped = 0  # nodes whose event was refused or whose call failed

    def note(self, record: NodeRecord) -> None:
        """Keep ``record`` for the next flush (a second note of the same instance replaces the first)."""
        with self._lock:
            self._pending[record.instance_id] = record

    def flush(self) -> int:
        """Send every node kept (module docstring); returns how many EventBridge accepted. Never raises."""
        with self._lock:
            records, self._pending = list(self._pending.values()), {}
        if not records:
            return 0
        details = list(ready_details(self.cluster, records))
        entries = [(EVENT_SOURCE, DETAIL_TYPE, json.dumps(d)) for d in details]
        counts = [len(d["nodes"]) for d in details]
        accepted = 0
        for start in range(0, len(entries), MAX_ENTRIES):
            batch, sizes = entries[start : start + MAX_ENTRIES], counts[start : start + MAX_ENTRIES]
            try:
                answers = self.bus.put_many(batch)
            except (AwsUnavailableError, AwsRequestError):
                log.exception("EventBridge put_events of Node Ready failed nodes=%d", sum(sizes))
                self.dropped += sum(sizes)
                continue
            for answer, size in zip(answers, sizes, strict=True):
                if answer is None:
                    accepted += size
                else:
                    self.dropped += size
                    log.error(
                        "EventBridge rejected Node Ready nodes=%d code=%s message=%s", size, answer.code, answer.message
                    )
        self.sent += accepted
        if accepted:
            log.info("Node Ready sent nodes=%d", accepted)
            if self.on_sent is not None:
                self.on_sent(accepted)
        return accepted

    def run(self, stop: threading.Event) -> None:
        """Flush every ``interval_seconds`` until ``stop`` is set, then once more."""
        while not stop.wait(self.interval_seconds):
            self.flush()
        self.flush()
