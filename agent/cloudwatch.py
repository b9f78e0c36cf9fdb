"""CloudWatch metrics the stack's alarms watch (``infra/operations.py``), published by the leader.

Prometheus (``agent.metrics``) serves whoever scrapes the cluster; the alarms live in CloudWatch so they work
without a Prometheus, and so "the agent is silent" can be seen from outside the cluster. Namespace
``CLOUDWATCH_NAMESPACE`` (``NodeManager``), dimension ``cluster``:

- ``AgentMembershipReports`` (Count; value = nodes reported): one data point per membership resync
  (``MEMBERSHIP_RESYNC_SECONDS``). Missing data = the agent is silent (alarm ``AgentSilent``).
- ``DrainFailures`` (Count): one per drain that ended ``failed`` or ``timed_out`` (alarm ``DrainFailures``).

``PutMetricData`` is allowed to the agent's role only for this namespace (IAM condition ``cloudwatch:namespace``).
Publishing never raises: a failure is logged (the alarms treat missing data as the agent being silent).

The lock's age (``LockHeldSeconds``, alarm ``LockHeldTooLong``) is the replenisher's to publish (it reads the ``LOCK``
item on every invocation): the agent's role may not read the cluster partition at all.
"""

from __future__ import annotations

import logging

from adapters.aws.ports import MetricPublisher

log = logging.getLogger(__name__)

MEMBERSHIP_REPORTS = "AgentMembershipReports"
DRAIN_FAILURES = "DrainFailures"


class CloudWatchPublisher:
    """Puts the alarm metrics (see the module docstring).

    Args:
        sink: where data points go (``adapters.aws.cloudwatch.MetricSink`` into ``CLOUDWATCH_NAMESPACE``); None
            disables publishing (``AGENT_CLOUDWATCH_METRICS=false``).
        cluster: the ``cluster`` dimension's value.
    """

    def __init__(self, sink: MetricPublisher | None, cluster: str) -> None:
        self.sink = sink
        self.cluster = cluster

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

    def membership_reported(self, nodes: int) -> None:
        """After a membership resync: the heartbeat (``AgentMembershipReports``, value = nodes reported)."""
        self.put(MEMBERSHIP_REPORTS, nodes)

    def drain_failed(self) -> None:
        self.put(DRAIN_FAILURES, 1)
