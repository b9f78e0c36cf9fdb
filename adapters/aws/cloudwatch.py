"""CloudWatch: one metric data point at a time. Thin; errors translated by ``adapters.aws.calls``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.aws.calls import call


class MetricSink:
    """PutMetricData into one namespace.

    Args:
        client: a boto3 ``cloudwatch`` client (or an ``adapters.aws.clients.LazyClient``).
        namespace: the metrics' namespace.
    """

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def put(self, name: str, value: float, unit: str, dimensions: Mapping[str, str]) -> None:
        """One data point of ``name``.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        call(
            "PutMetricData",
            self.client.put_metric_data,
            Namespace=self.namespace,
            MetricData=[
                {
                    "MetricName": name,
                    "Value": float(value),
                    "Unit": unit,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                }
            ],
        )
