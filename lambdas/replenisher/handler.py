"""Entry point of the replenisher Lambda: wiring only (settings, clients, logging, metrics, the lock).

``lambda_handler(event, context)`` is what Lambda calls (rules: "EC2 Instance Launch Unsuccessful", "EC2 Instance
Launch Successful", the periodic "Scheduled Event", the agent's "Node Drain ..." results). On its first invocation
it reads ``ReplenisherSettings`` from the environment and builds the AWS clients. ``handle(event, deps, now)``
does the work and is what tests call with clients of their own and an injected clock.

One invocation: parse -> ``gather`` (DescribeAutoScalingGroups filtered on the cluster tag, one Query of the
partition, DescribeInstances only for unregistered instances and for detached ones past their deadline) ->
``decide`` (pure) -> take the cluster lock if the plan changes capacity (conditioned on the lock item just read, so
a lock that changed hands since is noticed) -> ``execute`` -> release the lock. Level-triggered: every invocation
reconciles the whole cluster, so a missed or duplicated event costs nothing; Powertools idempotency is therefore not
used (it would add two DynamoDB calls to every invocation for no gain). The stack gives the function a reserved
concurrency of 1 so Auto Scaling's bursts of failure events are handled one after the other.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from adapters.aws.clients import new_session
from adapters.aws.gateway import AwsGateway
from adapters.aws.ports import AwsPort
from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.lock import LOCK_SK, LeaseLock
from adapters.dynamo.nodes import MARK_SK, mark_time
from adapters.dynamo.store import Store
from core.detach import DetachState
from core.exceptions import LockHeldError, LockLostError
from core.kops import CLUSTER_TAG, managed_group
from core.model import NodeRecord, utcnow
from core.runs import Run
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
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.builder import OWN_COMMAND_PREFIXES
from lambdas.replenisher.decide.cleanup import run_instances
from lambdas.replenisher.execute import Effects, execute
from lambdas.replenisher.plan import Action
from lambdas.replenisher.world import IN_SERVICE, Detached, Group, Instance, World, run_active

logger = lambda_logger()

LOCK_RETRY_SECONDS = 0.5  # between two looks at a lock another holder has (a refresh pass lasts a second or two)

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
    """

    settings: ReplenisherSettings
    store: Store
    aws: AwsPort
    telemetry: Telemetry
    after_action: Callable[[Action], None] | None = None
    scope: Scope = field(default_factory=Scope)
    sleep: Callable[[float], None] = time.sleep

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


def gather(deps: Deps, now: datetime) -> World:
    """Read what ``decide`` needs (see ``world``'s module docstring for the calls).

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: reads failed.
    """
    settings = deps.settings
    groups: dict[str, Group] = {}
    raw_groups = deps.aws.autoscaling.cluster_groups(settings.cluster_name)
    ledgers = {}
    nodes: dict[str, NodeRecord] = {}
    commands = {}
    protected: set[str] = set()
    runs: list[Run] = []
    runs_unreadable = False
    lock = None
    detached: dict[str, Detached] = {}
    mark = None
    for item in deps.store.query_partition(consistent=True):
        sk = str(item.get("sk", ""))
        try:
            if sk == LOCK_SK:
                lock = item
            elif sk.startswith(ledger_store.PREFIX):
                led = ledger_store.from_item(item)
                ledgers[led.asg_name] = led
            elif sk == MARK_SK:
                mark = mark_time(item)
            elif sk.startswith("NODE#"):
                record = NodeRecord.model_validate(item)
                nodes[record.instance_id] = record
            elif sk.startswith("CMD#") and sk[4:].startswith(OWN_COMMAND_PREFIXES):
                commands[sk[4:]] = item
            elif sk.startswith("RUN#"):
                if run_active(item):
                    try:
                        run = Run.model_validate(item)
                    except ValidationError:
                        runs_unreadable = True
                        raise
                    runs.append(run)
                    protected |= run_instances(run)
            elif sk.startswith("DETACH#"):
                protected.add(sk[7:])
                detached[sk[7:]] = detached_record(sk[7:], item)
        except ValidationError as err:
            logger.warning(f"unreadable item {sk} ignored", extra={"error": str(err)})
            deps.telemetry.count_by("Skipped", "reason", "unreadable_item")
    # fresh by its own write or by the agent's MEMBERSHIP mark (the agent writes a NODE# item only when it changes)
    nodes = {
        iid: record
        for iid, record in ((iid, r.with_mark(mark)) for iid, r in nodes.items())
        if record.fresh(now, settings.membership_max_age_seconds)
    }
    unregistered = []
    for raw in raw_groups:
        info = managed_group(raw, settings.cluster_name)
        if info is None:
            continue
        instances = []
        for inst in raw.get("Instances", []):
            instances.append(
                Instance(
                    instance_id=str(inst["InstanceId"]),
                    availability_zone=str(inst.get("AvailabilityZone", "")),
                    lifecycle_state=str(inst.get("LifecycleState", "")),
                    health_status=str(inst.get("HealthStatus", "Healthy")),
                )
            )
            if instances[-1].lifecycle_state == IN_SERVICE and instances[-1].instance_id not in nodes:
                unregistered.append(instances[-1].instance_id)
        groups[info.name] = Group(
            info=info,
            desired=int(raw.get("DesiredCapacity", 0)),
            min_size=int(raw.get("MinSize", 0)),
            max_size=int(raw.get("MaxSize", 0)),
            instances=tuple(instances),
            run_surge=sum(run.surge.get(info.name, 0) for run in runs),
            run_busy=any(info.name in run.busy_groups for run in runs),
        )
    if unregistered and nodes:  # without any membership nothing is judged by it: no need to ask
        times = deps.aws.ec2.launch_times(sorted(unregistered))
        for name, group in list(groups.items()):
            groups[name] = Group(
                info=group.info,
                desired=group.desired,
                min_size=group.min_size,
                max_size=group.max_size,
                instances=tuple(
                    Instance(
                        i.instance_id, i.availability_zone, i.lifecycle_state, i.health_status, times.get(i.instance_id)
                    )
                    for i in group.instances
                ),
                run_surge=group.run_surge,
                run_busy=group.run_busy,
            )
    due = [
        iid
        for iid, rec in detached.items()
        if rec.state in (DetachState.DETACHED.value, DetachState.TERMINATING.value)
        and rec.recorded_at is not None
        and (now - rec.recorded_at).total_seconds() > settings.detached_max_seconds
    ]
    if due:
        seen = deps.aws.ec2.describe(sorted(due))
        for iid in due:
            inst = seen.get(iid)
            detached[iid] = replace(
                detached[iid],
                asked=True,
                ec2_state=inst.state if inst else None,
                cluster_tag=inst.tags.get(CLUSTER_TAG) if inst else None,
            )
    return World(
        groups=groups,
        ledgers=ledgers,
        nodes=nodes,
        commands=commands,
        protected=frozenset(protected),
        active_runs=tuple(runs),
        runs_unreadable=runs_unreadable,
        lock=lock,
        detached=detached,
    )


def detached_record(instance_id: str, item: Mapping[str, Any]) -> Detached:
    """A ``DETACH#`` item as the sweep reads it (an unreadable time leaves ``recorded_at`` None: never swept)."""
    try:
        recorded_at: datetime | None = datetime.fromisoformat(str(item.get("recorded_at")))
    except ValueError:
        recorded_at = None
    if recorded_at is not None and recorded_at.tzinfo is None:
        recorded_at = None
    return Detached(
        instance_id=instance_id,
        asg_name=str(item.get("asg_name", "")),
        state=str(item.get("state", "")),
        recorded_at=recorded_at,
    )


def lock_free(lock: Mapping[str, Any] | None, now: datetime) -> bool:
    """True when nobody holds a valid lease on the cluster lock (never taken, released, or expired)."""
    if not lock or not lock.get("holder"):
        return True
    return float(lock.get("lease_expires_at", 0)) <= now.timestamp()


def process(notice: Event, deps: Deps, now: datetime, request_id: str) -> dict[str, Any]:
    """Gather, decide, lock, execute one parsed event; returns the response.

    A plan that needs the lock while another holder has it (a refresh run's pass, another invocation) waits for it
    up to ``LOCK_WAIT_SECONDS``, reading the world again each time, so a launch failure arriving mid-refresh is
    covered by this invocation; past that, only what needs no lock is done (the failure is recorded).
    """
    settings = deps.settings
    waited = 0.0  # seconds slept waiting for the lock: the clock the decisions read moves on by as much
    locker = LeaseLock(deps.store, clock=lambda: (now + timedelta(seconds=waited)).timestamp())
    lease = None
    while True:
        at = now + timedelta(seconds=waited)
        world = gather(deps, at)
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
    effects = Effects(
        store=deps.store,
        aws=deps.aws,
        telemetry=deps.telemetry,
        logger=logger,
        ttl_seconds=settings.command_ttl_seconds,
        after_action=deps.after_action,
        bounds=capacity_bounds(world, settings),
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
    response = {
        "status": status,
        "event_id": notice.event_id,
        "kind": notice.kind.value,
        "operation": plan.operation.value if plan.operation else None,
        "actions": results,
    }
    logger.info(
        f"{notice.detail_type} {notice.event_id}: {status}, {len(results)} actions",
        extra={"status": status, "operation": response["operation"]},
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
