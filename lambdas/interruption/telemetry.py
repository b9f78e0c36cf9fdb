"""Counting for the interruption Lambda: CloudWatch metrics in Embedded Metric Format through Powertools Metrics.

Metrics (unit Count, namespace ``POWERTOOLS_METRICS_NAMESPACE``, default dimensions ``service`` and ``cluster``):

- ``EventsReceived``: every invocation.
- ``EventsRejected`` with dimension ``reason`` (``malformed``, ``unsupported_event``): events not of the
  documented shape.
- ``EventsIgnored`` with dimension ``reason`` (``plan.IgnoreReason``): acknowledged without a command.
- ``EventsReplayed``: duplicates answered from the idempotency record.
- ``CommandsQueued``: SQS messages sent (re-sends included).
- ``InstancesDetached``: early replacements started.
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

    def flush(self) -> None:
        """Publish the metrics added since the last flush (nothing when there are none)."""
        if self.metrics.provider.metric_set:
            self.metrics.flush_metrics()
