"""CloudWatch metrics the stack's alarms watch (``infra/operations.py``), published by the leader.

Prometheus (``agent.metrics``) serves whoever scrapes the cluster; the alarms live in CloudWatch so they work
without a Prometheus, and so "the agent is silent" can be seen from outside the cluster. Namespace
``CLOUDWATCH_NAMESPACE`` (``NodeManager``), dimension ``cluster``:

- ``AgentMembershipReports`` (Count; value = nodes reported): one data point per membership resync
  (``MEMBERSHIP_RESYNC_SECONDS``). Missing data = the agent is silent (alarm ``AgentSilent``).
- ``DrainFailures`` (Count): one per drain that ended ``failed`` or ``timed_out`` (alarm ``DrainFailures``).
- ``LockHeldSeconds`` (Seconds): age of the cluster lock's current acquisition (0 when free), once per resync
  (alarm ``LockHeldTooLong``).

``PutMetricData`` is allowed to the agent's role only for this namespace (IAM condition ``cloudwatch:namespace``).
Publishing never raises: a failure is logged (the alarms treat missing data as the agent being silent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from adapters.aws.ports import MetricPublisher
from adapters.dynamo.lock import LOCK_SK
from adapters.dynamo.ports import ItemReader

log = logging.getLogger(__name__)

MEMBERSHIP_REPORTS = "AgentMembershipReports"
DRAIN_FAILURES = "DrainFailures"
LOCK_HELD_SECONDS = "LockHeldSeconds"


def lock_held_seconds(lock_item: dict[str, Any] | None, now_epoch: float) -> float:
    """Seconds since the current holder acquired the lock; 0 when it is free or released. Pure."""
    if not lock_item or not lock_item.get("holder"):
        return 0.0
    acquired = float(lock_item.get("acquired_at") or now_epoch)
    return max(0.0, now_epoch - acquired)


class CloudWatchPublisher:
    """Puts the alarm metrics (see the module docstring).

    Args:
        sink: where data points go (``adapters.aws.cloudwatch.MetricSink`` into ``CLOUDWATCH_NAMESPACE``); None
            disables publishing (``AGENT_CLOUDWATCH_METRICS=false``).
        cluster: the ``cluster`` dimension's value.
        clock: epoch seconds.
    """

    def __init__(self, sink: MetricPublisher | None, cluster: str, clock: Callable[[], float] | None = None) -> None:
        self.sink = sink
        self.cluster = cluster
        self.clock = clock or time.time

    def put(self, name: str, value: float, unit: str = "Count") -> bool:
        """One data point of ``name``; True when CloudWatch accepted it."""
        if self.sink is None:
            return False
        try:
            self.sink.put(name, value, unit, {"cluster": self.cluster})
        except Exception:
            log.exception("PutMetricData failed metric=%s", name)
            return False
        return True

    def membership_reported(self, nodes: int, store: ItemReader | None = None) -> None:
        """After a membership resync: the heartbeat, and the lock's age read from ``store``."""
        self.put(MEMBERSHIP_REPORTS, nodes)
        if store is None:
            return
        try:
            item = store.get(LOCK_SK, consistent=False)
        except Exception:
            log.exception("could not read the lock for its age")
            return
        self.put(LOCK_HELD_SECONDS, lock_held_seconds(item, self.clock()), unit="Seconds")

    def drain_failed(self) -> None:
        self.put(DRAIN_FAILURES, 1)
