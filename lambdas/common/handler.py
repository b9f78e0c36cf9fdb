"""Wiring the Lambdas' entry points share: the log stream, the cluster's metrics, the clients built from one AWS
session, the ``Deps`` kept for the life of an execution environment. (Reading the input and answering bad input is
``lambdas.common.prologue``.)

Nothing here reads settings or builds clients at import: ``PerEnvironment`` builds on first use.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from aws_lambda_powertools import Logger, Metrics

from adapters.aws.clients import lazy_clients
from core.exceptions import SettingsError
from core.lock import lease_too_short
from lambdas.events.scope import Scope

T = TypeVar("T")


class StdoutStream:
    """A stream that writes to whatever ``sys.stdout`` is when a line is written (Lambda's log stream in
    production; a test's or the CLI's capture otherwise), since a module's logger outlives any one invocation."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def lambda_logger() -> Logger:
    """A Powertools ``Logger`` writing JSON lines to ``StdoutStream``; its service name comes from
    ``POWERTOOLS_SERVICE_NAME`` (nothing of the product's settings is read)."""
    return Logger(stream=StdoutStream())  # type: ignore[arg-type]  # asks for IO[str]; only write/flush are used


def cluster_metrics(cluster: str, metrics: Metrics | None = None) -> Metrics:
    """``metrics`` (default a Powertools ``Metrics`` whose namespace is ``POWERTOOLS_METRICS_NAMESPACE``) with the
    default dimension ``cluster=<cluster>``."""
    metrics = metrics or Metrics()
    metrics.set_default_dimensions(cluster=cluster)
    return metrics


def session_clients(session: Any) -> dict[str, Any]:
    """The clients every Lambda's ``Deps.from_clients`` takes, from one AWS SDK session (the Lambda's role, region
    and endpoints): ``dynamodb`` (a resource, for the state table), ``autoscaling``, ``ec2``, ``sqs``; each made on
    first use, with the Lambdas' timeouts and retries (``adapters.aws.clients.LAMBDA_CONFIG``)."""
    return lazy_clients(session, ("dynamodb", "autoscaling", "ec2", "sqs"))


def check_lease(lease_seconds: float, variable: str, context: Any) -> None:
    """Check the cluster lock's lease against this invocation's time (``context.get_remaining_time_in_millis()``
    at its start: the function's timeout, less the time Lambda spent starting), when the settings could not (the
    stack sets ``FUNCTION_TIMEOUT_SECONDS``; a timeout changed outside the stack is caught here).

    Raises:
        SettingsError: (naming ``variable``) the lease may expire before the invocation ends
            (``core.lock.lease_too_short``).
    """
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return
    problem = lease_too_short(lease_seconds, remaining() / 1000)
    if problem:
        raise SettingsError(variable, f"{problem} (this invocation's remaining time)")


def deployment_scope(account_id: str | None, region: str | None, client: Any = None) -> Scope:
    """The account and region the Lambda runs in, as far as known before an invocation (``lambda_handler`` then
    adds what the context's function ARN names: ``Scope.with_context``).

    Args:
        account_id: the ``ACCOUNT_ID`` setting (None: unset).
        region: the AWS SDK session's region (in Lambda ``AWS_REGION``, set by the runtime), or None.
        client: a boto3 client of the Lambda, whose ``meta.region_name`` is used when ``region`` is None (the
            clients a test passes are bound to their region).
    """
    if region is None and client is not None:
        try:
            region = client.meta.region_name
        except Exception:  # noqa: BLE001 - a stand-in without meta, or a client that cannot be made: region unknown
            region = None
    return Scope(account=account_id, region=region or None)


class PerEnvironment(Generic[T]):
    """A value built on first use and kept for the life of the execution environment (settings are read then,
    never at import).

    Args:
        build: makes the value, e.g. ``lambda: Deps.from_session(Settings.from_env(), new_session())``.
    """

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None

    def __call__(self) -> T:
        if self._value is None:
            self._value = self._build()
        return self._value


def direct_caller(context: Any) -> str | None:
    """Who a direct invocation says it is: ``context.client_context.custom["caller"]`` (the CLI puts its STS
    identity there, ``cli.main.client_context``); None when the invocation carried no client context (EventBridge
    sends none) or no caller. Self-reported: CloudTrail's Lambda data events hold the authenticated caller."""
    client = getattr(context, "client_context", None)
    custom = getattr(client, "custom", None)
    if not isinstance(custom, dict):
        return None
    caller = custom.get("caller")
    return str(caller)[:256] if caller else None
