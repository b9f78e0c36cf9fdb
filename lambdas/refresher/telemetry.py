"""Metrics of the refresher (Powertools Metrics, EMF; namespace ``POWERTOOLS_METRICS_NAMESPACE``, default dimensions
``service`` and ``cluster``):

- ``InvocationsReceived`` (Count): every invocation.
- ``RequestsRejected`` (Count, dimension ``reason``): invalid manual payloads, malformed or unsupported events.
- ``RunsStarted`` (Count), ``NodesReplaced`` (Count), ``RunDuration`` (Seconds, when a run ends),
  ``RunFailures`` (Count: runs paused by a drain that failed or timed out), ``RunsCancelled`` (Count).
"""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit

from lambdas.interruption.telemetry import Telemetry


class RefresherTelemetry(Telemetry):
    """The interruption Lambda's ``Telemetry`` plus durations."""

    def seconds(self, name: str, value: float) -> None:
        """Add a duration in seconds to the metric ``name``."""
        self.metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=value)
