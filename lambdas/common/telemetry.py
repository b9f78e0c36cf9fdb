"""The Lambdas' metrics: CloudWatch metrics in Embedded Metric Format through Powertools Metrics (namespace
``POWERTOOLS_METRICS_NAMESPACE``, default dimensions ``service`` and ``cluster``). Unit Count unless said.

Every Lambda (``lambdas.common.prologue``):

- ``EventsReceived`` (interruption, replenisher) / ``InvocationsReceived`` (refresher): every invocation.
- ``EventsRejected`` / ``RequestsRejected`` with dimension ``reason`` (``malformed``, ``unsupported_event``,
  ``time_in_future``, ``invalid_request``): inputs not of the documented shape.
- ``EventsOutOfScope`` with dimension ``reason`` (``lambdas.events.scope.ScopeReason``: ``foreign_account``,
  ``foreign_region``, ``account_unknown``, ``region_unknown``): events of another account or region, acknowledged.

The interruption Lambda:

- ``EventsIgnored`` with dimension ``reason`` (``plan.IgnoreReason``): acknowledged without a command.
- ``EventsReplayed``: duplicates answered from the idempotency record.
- ``CommandsQueued``: SQS messages sent (re-sends included).
- ``InstancesDetached``: early replacements started.

The refresher:

- ``RunsStarted``, ``NodesReplaced``, ``RunDuration`` (Seconds, when a run ends), ``RunFailures`` (runs paused by a
  drain that failed or timed out, or failed), ``CapacityLeftRaised`` (surge units and raised MaxSizes a run left
  raised past their ``give_back`` deadline: it ended ``failed``), ``RunsCancelled``.

The interruption Lambda and the refresher (``lambdas.common.refused``):

- ``RunRecordRefused`` with dimension ``code`` (``ItemTooLarge``, ``ValidationException``...): a ``RUN#`` save
  refused for its size or as invalid (a replacement run's, a refresh pass's, an operator's cancel's).
- ``ReplacementsStarted``; ``ReplacementsRefused`` with dimension ``reason`` (``lock_or_run``,
  ``run_record_refused``, a ``plan.SkipReason``): the interruption Lambda's replacement runs
  (``REBALANCE_POLICY=replace``).

The replenisher:

- ``CapacityChanges``, ``CommandsQueued``, ``InstancesTerminated``.
- ``CapacityChangeRefused``, ``TerminateRefused``: an UpdateAutoScalingGroup or a terminate Auto Scaling refused.
- ``CapacityLeftRaised``: desired-capacity units and MaxSizes a give-back left raised past
  ``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS`` (``Ledger.left_raised``): alarm on it.
- ``LockHeldSeconds`` (Seconds): every invocation, the age of the cluster lock's current acquisition as read
  (``core.lock.held_seconds``; 0 when free), the ``LockHeldTooLong`` alarm's metric.
- ``CommandsResent``, ``CommandsExpired``: the tick's command sweep (``lambdas.common.sweep``);
  ``CommandPointersBackfilled``: commands it found recorded without pointers (a version without them ran: a rollback;
  ``adapters.dynamo.command_index.backfill_pointers``).
- ``Skipped`` with dimension ``reason`` (``plan.Reason``, ``unreadable_item``): what a plan noted and left alone.
"""

from __future__ import annotations

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric


class Telemetry:
    """Thin wrapper over one Powertools ``Metrics`` object.

    Args:
        metrics: a ``Metrics`` instance (built when the handler starts; its namespace comes from
            ``POWERTOOLS_METRICS_NAMESPACE`` unless given).
    """

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def count(self, name: str, value: int = 1) -> None:
        """Add ``value`` to the metric ``name`` (published by ``flush``)."""
        self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def count_by(self, name: str, dimension: str, value: str) -> None:
        """Publish one count of ``name`` with an extra dimension (its own EMF record, published at once, so
        the dimension does not spread to the invocation's other metrics)."""
        with single_metric(
            name=name,
            unit=MetricUnit.Count,
            value=1,
            namespace=self.metrics.provider.namespace,
            default_dimensions=dict(self.metrics.default_dimensions),
        ) as metric:
            metric.add_dimension(name=dimension, value=value)

    def seconds(self, name: str, value: float) -> None:
        """Add a duration in seconds to the metric ``name``."""
        self.metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=value)

    def flush(self) -> None:
        """Publish the metrics added since the last flush (nothing when there are none)."""
        if self.metrics.provider.metric_set:
            self.metrics.flush_metrics()
