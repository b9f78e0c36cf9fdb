"""Entry point of the refresher Lambda: wiring (settings, clients, logging, metrics); the work is
``lambdas.refresher.service``'s.

``lambda_handler(event, context)`` is what Lambda calls; on its first invocation it reads ``RefresherSettings`` and
builds the AWS clients. ``handle(event, deps, context)`` does the work and is what tests, the CLI's ``--local``
mode and the scenario call with clients of their own.

Each invocation is short and level-triggered: it reads the run and the world, decides the next step(s)
(``decide.advance``), applies them, and looks again, until the run waits for something. A wait for a drain returns
at once (the agent's result event ends it); a wait for a termination or the masters' second check is polled every
``REFRESH_POLL_SECONDS``, one for a launch or a node to become Ready (their events end it: Launch Successful, the
agent's "Node Ready") every ``REFRESH_EVENT_WAIT_POLL_SECONDS``, for at most ``REFRESH_WAIT_BUDGET_SECONDS`` (and
never past the invocation's remaining time minus a margin); the periodic tick catches anything an event missed.

Responses (JSON; what ``aws lambda invoke`` and the CLI print):

- ``{"status": "rejected", "reason": "invalid_request" | "malformed" | "unsupported_event" | "other_cluster",
  "error": ..., "errors": [...]}``: nothing was done (never raised, so nothing retries it). ``invalid_request`` also
  answers a refresh request asking for more than the settings allow (``lambdas.refresher.bounds.request_refusals``).
- ``{"status": "dry_run", "table": ..., "groups": [...], "steps": [...], "actions": [...]}``: the plan only.
- ``{"status": "refused", "reason": ...}``: a start refused (masters not Ready, lock held, unknown groups).
- ``{"status": "nothing_to_do", "table": ...}``, ``{"status": "already_running", "run": ...}``.
- ``{"status": "started" | "advanced" | "idle" | "cancel_requested", "run": {...}, "actions": [...]}``.
- ``{"status": "acknowledged", "reason": "not_ours" | "not_in_run" | "no_active_run" | "other_cluster" |
  "recorded_at_surge"}``: an event needing nothing (``not_in_run``: a "Node Ready" report of none of the active
  run's groups, or of its old instances alone while no step counts Ready nodes: ``service.waits_on``;
  ``recorded_at_surge``: any launch, with no call: a surge records its spare's launch wait itself, and the spare's
  "Node Ready" advances the run).
- ``{"status": "lock_lost", "run": {...}, "actions": [...], "lock": ...}``: another holder has the cluster lock; the
  run's fenced writes are refused, so nothing more of it is applied until its holder gets the lock again (logged,
  counted as ``LockLost``).
- ``{"status": "acknowledged", "reason": "foreign_account" | "foreign_region" | ...}``: an event of another account
  or region (``lambdas.events.scope``); counted (``EventsOutOfScope``), nothing read or done.
- ``{"status": "ok", "cluster_groups": [...], "runs": [...], "lock": ..., "ledger": [...], "membership": [...]}``:
  status (``cluster_groups``: ``summary.group_rows``; ``cluster_groups_error`` too when AWS did not answer; with a
  ``run_id``, that run and its whole ``RUN#`` record as ``run_record``).

Transient faults (throttling, DynamoDB unavailable) are raised: EventBridge retries within the rule's policy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.aws.clients import new_session
from adapters.aws.gateway import AwsGateway
from adapters.aws.ports import AwsPort
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.node_memo import NodeRecordMemo
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.lock import Lease
from core.model import utcnow
from core.settings import RefresherSettings
from lambdas.common.handler import (
    PerEnvironment,
    check_lease,
    cluster_metrics,
    deployment_scope,
    direct_caller,
    session_clients,
)
from lambdas.common.prologue import admit, invocation
from lambdas.common.telemetry import Telemetry
from lambdas.events.event import Event, EventKind
from lambdas.events.scope import Scope
from lambdas.refresher.execute import Effects
from lambdas.refresher.gather import GatherMemo
from lambdas.refresher.service import logger, serve

CONTEXT_MARGIN_SECONDS = 5.0  # stop polling this long before the invocation's timeout

KINDS = frozenset(
    {
        EventKind.SCHEDULE,
        EventKind.TICK,
        EventKind.REQUEST,
        EventKind.DRAIN_FINISHED,
        EventKind.LAUNCH_SUCCEEDED,
        EventKind.NODE_READY,
    }
)  # what invokes the refresher (see ``lambdas.events.event``)


@dataclass
class Deps:
    """Everything ``handle`` needs, built once per execution environment (or by a test).

    Attributes:
        clock: the current time (UTC, aware); sleep: waits between polls (seconds); monotonic: the invocation's
            budget clock (seconds). Tests and the simulation inject them.
        scope: the account and region the Lambda runs in (the invocation's context adds what its function ARN
            names); events of others are acknowledged, not acted on.
        memo: the validated ``NODE#`` records of the last membership read, kept for the execution environment
            (``adapters.dynamo.node_memo``): a warm invocation validates only the items that changed.
        gather_memo: the groups' facts of the last read and the Ready ids found, kept for the execution environment
            (``lambdas.refresher.gather.GatherMemo``): a warm pass makes only the facts of what changed.
    """

    settings: RefresherSettings
    store: Store
    aws: AwsPort
    telemetry: Telemetry
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    scope: Scope = field(default_factory=Scope)
    memo: NodeRecordMemo = field(default_factory=NodeRecordMemo)
    gather_memo: GatherMemo = field(default_factory=GatherMemo)
    runs: RunStore = field(init=False)
    lock: LeaseLock = field(init=False)

    def __post_init__(self) -> None:
        self.runs = RunStore(self.store, retention_seconds=self.settings.run_retention_seconds)
        self.lock = LeaseLock(self.store, clock=lambda: self.clock().timestamp())

    @classmethod
    def from_clients(
        cls,
        settings: RefresherSettings,
        *,
        dynamodb: Any,
        autoscaling: Any,
        ec2: Any,
        sqs: Any,
        metrics: Metrics | None = None,
        region: str | None = None,
        **kwargs: Any,
    ) -> Deps:
        """Build from AWS SDK clients (``dynamodb`` is a resource, for the state table); ``region`` is the
        deployment's (default the ``ec2`` client's)."""
        metrics = cluster_metrics(settings.cluster_name, metrics)
        return cls(
            settings=settings,
            store=Store(dynamodb.Table(settings.table_name), settings.cluster_name),
            aws=AwsGateway.from_clients(autoscaling, ec2, sqs, settings.queue_url),
            telemetry=Telemetry(metrics),
            scope=deployment_scope(settings.account_id, region, ec2),
            **kwargs,
        )

    @classmethod
    def from_session(cls, settings: RefresherSettings, session: Any, **kwargs: Any) -> Deps:
        """Build the clients from one AWS SDK session (the Lambda's role, region and endpoints)."""
        region = getattr(session, "region_name", None)
        return cls.from_clients(settings, **session_clients(session), region=region, **kwargs)

    def effects(self, lease: Lease | None = None) -> Effects:
        return Effects(
            lease=lease,
            store=self.store,
            runs=self.runs,
            lock=self.lock,
            aws=self.aws,
            telemetry=self.telemetry,
            logger=logger,
            ttl_seconds=self.settings.command_ttl_seconds,
        )


def _budget(deps: Deps, context: LambdaContext | None) -> float:
    budget = deps.settings.wait_budget_seconds
    if context is not None:
        budget = min(budget, context.get_remaining_time_in_millis() / 1000 - CONTEXT_MARGIN_SECONDS)
    return max(0.0, budget)


def handle(event: Any, deps: Deps, context: LambdaContext | None = None) -> dict[str, Any]:
    """Handle one invocation (see the module docstring for the inputs and responses).

    Raises:
        RetryableError: a transient fault; EventBridge delivers the event again.
        AwsRequestError: AWS refused a call for a reason retrying will not fix (e.g. a missing permission).
    """
    telemetry = deps.telemetry
    with invocation(logger, telemetry, "InvocationsReceived"):
        # the refresher never refused events from the future: its decisions read the clock, not the event's time
        trigger = admit(
            event,
            KINDS,
            deps.clock(),
            logger,
            telemetry,
            "RequestsRejected",
            scope=deps.scope.with_context(context),
            reject_future=False,
        )
        if not isinstance(trigger, Event):
            return trigger
        caller = direct_caller(context)
        if trigger.kind is EventKind.REQUEST or caller is not None:
            # a manual invocation names its caller (the CLI's STS identity; CloudTrail holds the authenticated one)
            logger.info(
                f"invoked by {trigger.describe()} from {caller or 'a caller that did not name itself'}",
                extra={
                    "trigger": trigger.kind.value,
                    "caller": caller,
                    "request_id": getattr(context, "aws_request_id", None),
                },
            )
        else:
            logger.info(f"invoked by {trigger.describe()}", extra={"trigger": trigger.kind.value})
        # the invocation's own lock holder name: Lambda's request id (a new id when called without a context)
        response = serve(trigger, deps, _budget(deps, context), getattr(context, "aws_request_id", None))
        logger.info(
            f"{trigger.describe()}: {response['status']}",
            extra={"status": response["status"], "run": (response.get("run") or {}).get("run_id")},
        )
        return response


# The execution environment's ``Deps``, built on first use (settings read then, never at import).
_deps = PerEnvironment(lambda: Deps.from_session(RefresherSettings.from_env(), new_session()))


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (EventBridge rules and manual invocations). See ``handle``."""
    deps = _deps()
    check_lease(deps.settings.lock_lease_seconds, "REFRESH_LOCK_LEASE_SECONDS", context)
    return handle(event, deps, context)
