"""Entry point of the replenisher Lambda: wiring only (settings, clients, logging, metrics, the lock).

``lambda_handler(event, context)`` is what Lambda calls (rules: "EC2 Instance Launch Unsuccessful", "EC2 Instance
Launch Successful", the periodic "Scheduled Event", the agent's "Node Drain ..." results). On its first invocation
it reads ``ReplenisherSettings`` from the environment and builds the AWS clients. ``handle(event, deps, now)``
does the work and is what tests call with clients of their own and an injected clock.

After the plan, every group of the cluster is given the termination lifecycle hook where it lacks it
(``lambdas.replenisher.hooks``; reported as ``"hooks"`` in the response).

One invocation: parse -> ``gather`` (DescribeAutoScalingGroups filtered on the cluster tag, a Query of the cluster
partition (``gather.read_items``), two of the replenisher's own commands unless a tick needs none (``own_commands``),
the membership mark and, when its version changed, the ``NODE#`` items, DescribeInstances only
for unregistered instances and for detached ones past their deadline) -> ``decide`` (pure) -> take the cluster lock if
the plan changes capacity (conditioned on the lock item just read, so a lock that changed hands since is noticed) ->
``execute`` -> release the lock. An event that concerns no reconcile is answered before any of that
(``decide.acknowledged``): an agent result of a command not the replenisher's with no read; a launch success in a
group whose hook this environment has seen, while no ledger carries a compensation, after one Query of the ``COMP#``
items. Level-triggered: every other invocation reconciles the whole cluster, so a missed or duplicated event costs
nothing; Powertools idempotency is therefore not used (it would add two DynamoDB calls to every invocation for no
gain). The stack gives the function a reserved concurrency of 1 so Auto Scaling's bursts of failure events are handled
one after the other.

Outcomes (the return value, logged):

- ``{"status": "rejected", "reason": ...}``: not the documented shape; logged, counted (``EventsRejected``), not
  raised (no retry).
- ``{"status": "noted", "actions": [...]}``: nothing changed (foreign event, nothing to do, lock held, ...).
- ``{"status": "acknowledged", "reason": "foreign_account" | "foreign_region" | ...}``: the event is another
  account's or region's (``lambdas.events.scope``); counted (``EventsOutOfScope``), nothing read or done.
- ``{"status": "acted" | "dry_run", "operation": ..., "actions": [...]}``: the plan was applied (or only logged).
- ``{"status": "lock_lost", "operation": ..., "actions": [...]}``: the lease expired and another holder took the
  lock mid-plan; a fenced write was refused and nothing after it was done (logged, counted as ``LockLost``). Not
  raised: the new holder reconciles the whole cluster itself.
- Transient faults (throttling, DynamoDB unavailable, a ledger changed underneath) are raised so the rule's retry
  policy delivers the event again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.aws.clients import new_session
from adapters.aws.gateway import AwsGateway
from adapters.aws.ports import AwsPort
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.exceptions import LockHeldError, LockLostError
from core.lock import held_seconds
from core.model import utcnow
from core.settings import ReplenisherSettings
from lambdas.common.handler import (
    PerEnvironment,
    check_lease,
    cluster_metrics,
    deployment_scope,
    lambda_logger,
    session_clients,
)
from lambdas.common.prologue import admit, invocation
from lambdas.common.sweep import sweep_commands
from lambdas.common.telemetry import Telemetry
from lambdas.events.event import Event, EventKind
from lambdas.events.scope import Scope
from lambdas.replenisher.bounds import capacity_bounds
from lambdas.replenisher.decide import acknowledged, decide
from lambdas.replenisher.execute import Effects, execute
from lambdas.replenisher.gather import GatherMemo, compensation_active, gather, lock_free
from lambdas.replenisher.hooks import Seen, ensure_hooks
from lambdas.replenisher.plan import Action, SetCapacity

logger = lambda_logger()

LOCK_RETRY_SECONDS = 0.5  # between two looks at a lock another holder has (a refresh pass lasts a second or two)
# the LOCK item's age as this invocation read it (``core.lock.held_seconds``), the ``LockHeldTooLong`` alarm's metric
# (infra/operations.py): published here, where the item is read anyway, so the agent needs no read of the partition
LOCK_HELD_SECONDS = "LockHeldSeconds"

KINDS = frozenset(
    {EventKind.LAUNCH_FAILED, EventKind.LAUNCH_SUCCEEDED, EventKind.TICK, EventKind.DRAIN_FINISHED}
)  # the events this Lambda reconciles on


@dataclass
class Deps:
    """Everything ``handle`` needs, built once per execution environment (or by a test).

    Attributes:
        settings: the Lambda's settings.
        store: the cluster's partition of the state table.
        aws: the AWS adapter.
        telemetry: metrics.
        after_action: passed to the executor (tests inject crashes there); None in production.
        scope: the account and region the Lambda runs in; events of others are acknowledged, not acted on.
        sleep: waits between two looks at a lock another holder has (seconds); tests inject it.
        hooks_seen: the groups whose termination lifecycle hook was found right, kept for the execution
            environment (``lambdas.replenisher.hooks``).
        memo: what ``gather`` keeps for the execution environment (the records of the ``NODE#`` items and the
            groups' instances it last read: ``gather.GatherMemo``).
    """

    settings: ReplenisherSettings
    store: Store
    aws: AwsPort
    telemetry: Telemetry
    after_action: Callable[[Action], None] | None = None
    scope: Scope = field(default_factory=Scope)
    sleep: Callable[[float], None] = time.sleep
    hooks_seen: dict[str, Seen] = field(default_factory=dict)
    memo: GatherMemo = field(default_factory=GatherMemo)

    @classmethod
    def from_clients(
        cls,
        settings: ReplenisherSettings,
        *,
        dynamodb: Any,
        autoscaling: Any,
        ec2: Any,
        sqs: Any,
        metrics: Metrics | None = None,
        region: str | None = None,
    ) -> Deps:
        """Build from AWS SDK clients (``dynamodb`` is a resource) and an optional Powertools ``Metrics``;
        ``region`` is the deployment's (default the ``ec2`` client's)."""
        metrics = cluster_metrics(settings.cluster_name, metrics)
        return cls(
            settings=settings,
            store=Store(dynamodb.Table(settings.table_name), settings.cluster_name),
            aws=AwsGateway.from_clients(autoscaling, ec2, sqs, settings.queue_url),
            telemetry=Telemetry(metrics),
            scope=deployment_scope(settings.account_id, region, ec2),
        )

    @classmethod
    def from_session(cls, settings: ReplenisherSettings, session: Any) -> Deps:
        """Build the real clients from one AWS SDK session."""
        return cls.from_clients(settings, **session_clients(session), region=getattr(session, "region_name", None))


def process(notice: Event, deps: Deps, now: datetime, request_id: str) -> dict[str, Any]:
    """Gather, decide, lock, execute one parsed event; returns the response.

    A plan that needs the lock while another holder has it (a refresh run's pass, another invocation) waits for it
    up to ``LOCK_WAIT_SECONDS``, reading the world again each time, so a launch failure arriving mid-refresh is
    covered by this invocation; past that, only what needs no lock is done (the failure is recorded).
    """
    settings = deps.settings
    early = acknowledged(notice, settings, lambda: compensation_active(deps.store), deps.hooks_seen)
    if early is not None:  # nothing to reconcile: no world read, no lock, no hooks (the tick ensures them)
        effects = Effects(deps.store, deps.aws, deps.telemetry, logger, settings.command_ttl_seconds)
        return _respond(notice, "noted", None, execute(early, effects, now, dry_run=settings.dry_run))
    waited = 0.0  # seconds slept waiting for the lock: the clock the decisions read moves on by as much
    locker = LeaseLock(deps.store, clock=lambda: (now + timedelta(seconds=waited)).timestamp())
    lease = None
    while True:
        at = now + timedelta(seconds=waited)
        world = gather(deps, at, logger, tick=notice.kind is EventKind.TICK)
        free = lock_free(world.lock, at)
        plan = decide(notice, at, settings, world, lock_free=free)
        waiting = waited + LOCK_RETRY_SECONDS <= settings.lock_wait_seconds
        if not free and waiting and decide(notice, at, settings, world, lock_free=True).needs_lock:
            deps.sleep(LOCK_RETRY_SECONDS)
            waited += LOCK_RETRY_SECONDS
            continue
        if not (plan.needs_lock and not settings.dry_run):
            break
        assert plan.operation is not None
        try:
            lease = locker.acquire(
                f"replenisher:{request_id}",
                plan.operation.value,
                settings.lock_lease_seconds,
                seen=dict(world.lock) if world.lock else None,
                use_seen=True,
            )
            break
        except LockHeldError as err:
            logger.info(f"lock taken meanwhile: {err}")
            if waiting:
                deps.sleep(LOCK_RETRY_SECONDS)
                waited += LOCK_RETRY_SECONDS
                continue
            plan = decide(notice, at, settings, world, lock_free=False)
            break
    now = at
    deps.telemetry.seconds(LOCK_HELD_SECONDS, held_seconds(world.lock, now.timestamp()))
    effects = Effects(
        store=deps.store,
        aws=deps.aws,
        telemetry=deps.telemetry,
        logger=logger,
        ttl_seconds=settings.command_ttl_seconds,
        after_action=deps.after_action,
        # only a resize is clamped (``execute._set_capacity``): a plan without one (every steady tick) makes none
        bounds=capacity_bounds(world, settings) if any(isinstance(a, SetCapacity) for a in plan.actions) else {},
        lease=lease,
    )
    lost: LockLostError | None = None
    try:
        results = execute(plan, effects, now, dry_run=settings.dry_run)
    except LockLostError as err:
        lost, results = err, []
        logger.warning(f"lock lost mid-plan, nothing more applied: {err}", extra={"lock": err.current})
        deps.telemetry.count("LockLost")
    finally:
        if lease is not None:
            locker.release(lease)  # a lease already lost is not released (conditioned on its fencing)
    status = ("dry_run" if settings.dry_run else "acted") if plan.changes else "noted"
    if lost is not None:
        status = "lock_lost"
    hooks = ensure_hooks(deps.aws.autoscaling, world.groups, deps.hooks_seen, settings, now, deps.telemetry, logger)
    return _respond(notice, status, plan.operation.value if plan.operation else None, results, hooks)


def _respond(
    notice: Event, status: str, operation: str | None, results: list[dict[str, str]], hooks: Any = None
) -> dict[str, Any]:
    """The invocation's response (the module docstring's outcomes), logged."""
    response: dict[str, Any] = {
        "status": status,
        "event_id": notice.event_id,
        "kind": notice.kind.value,
        "operation": operation,
        "actions": results,
    }
    if hooks:
        response["hooks"] = hooks
    logger.info(
        f"{notice.detail_type} {notice.event_id}: {status}, {len(results)} actions",
        extra={"status": status, "operation": operation},
    )
    return response


def handle(event: Any, deps: Deps, now: datetime | None = None, request_id: str | None = None) -> dict[str, Any]:
    """Handle one EventBridge event.

    Args:
        event: the raw event.
        deps: settings, clients and metrics.
        now: the current time (UTC); default the clock. Tests pass it to play hold periods and backoff.
        request_id: the invocation's id (the lock holder is ``replenisher:<request id>``); default a new UUID.

    Returns:
        The response dict (see the module docstring).

    Raises:
        RetryableError: a transient fault (the event should be delivered again).
        LedgerConflictError: a ledger changed under this invocation (retried likewise).
        AwsRequestError: AWS refused a call for a reason retrying will not fix.
    """
    now = now or utcnow()
    telemetry = deps.telemetry
    with invocation(logger, telemetry, "EventsReceived"):
        notice = admit(event, KINDS, now, logger, telemetry, "EventsRejected", scope=deps.scope)
        if not isinstance(notice, Event):
            return notice
        response = process(notice, deps, now, request_id or str(uuid.uuid4()))
        if notice.kind is EventKind.TICK and deps.settings.command_sweep_seconds:
            swept = sweep_commands(
                deps.store,
                deps.aws.queue,
                now,
                deps.settings.command_sweep_seconds,
                dry_run=deps.settings.dry_run,
                logger=logger,
            )
            telemetry.count("CommandsResent", len(swept["resent"]))
            telemetry.count("CommandsExpired", len(swept["expired"]))
            telemetry.count("CommandPointersBackfilled", len(swept.get("pointers_backfilled", [])))
            response["swept"] = swept
        return response


# The execution environment's ``Deps``, built on first use (settings read then, never at import).
_deps = PerEnvironment(lambda: Deps.from_session(ReplenisherSettings.from_env(), new_session()))


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (EventBridge target). See ``handle``."""
    deps = _deps()
    check_lease(deps.settings.lock_lease_seconds, "LOCK_LEASE_SECONDS", context)
    deps.scope = deps.scope.with_context(context)
    return handle(event, deps, request_id=getattr(context, "aws_request_id", None))
