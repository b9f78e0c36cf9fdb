"""Entry point of the refresher Lambda: wiring (settings, clients, logging, metrics) and the invocation loop.

``lambda_handler(event, context)`` is what Lambda calls; on its first invocation it reads ``RefresherSettings`` and
builds the AWS clients. ``handle(event, deps, context)`` does the work and is what tests, the CLI's ``--local``
mode and the scenario call with clients of their own.

Each invocation is short and level-triggered: it reads the run and the world, decides the next step(s)
(``decide.advance``), applies them, and looks again, until the run waits for something. A wait for a drain returns
at once (the agent's result event ends it); a wait for a node to become Ready, a launch, a termination or the
masters' second check is polled for at most ``REFRESH_WAIT_BUDGET_SECONDS`` (and never past the invocation's
remaining time minus a margin); the periodic tick catches anything an event missed.

Responses (JSON; what ``aws lambda invoke`` and the CLI print):

- ``{"status": "rejected", "reason": "invalid_request" | "malformed" | "unsupported_event" | "other_cluster",
  "error": ..., "errors": [...]}``: nothing was done (never raised, so nothing retries it).
- ``{"status": "dry_run", "table": ..., "groups": [...], "steps": [...], "actions": [...]}``: the plan only.
- ``{"status": "refused", "reason": ...}``: a start refused (masters not Ready, lock held, unknown groups).
- ``{"status": "nothing_to_do", "table": ...}``, ``{"status": "already_running", "run": ...}``.
- ``{"status": "started" | "advanced" | "idle" | "cancel_requested", "run": {...}, "actions": [...]}``.
- ``{"status": "acknowledged", "reason": "not_ours" | "not_in_run" | "no_active_run"}``: an event needing nothing.
- ``{"status": "ok", "runs": [...], "lock": ..., "ledger": [...], "membership": [...]}``: status.

Transient faults (throttling, DynamoDB unavailable) are raised: EventBridge retries within the rule's policy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.aws.clients import new_session
from adapters.aws.gateway import AwsGateway
from adapters.aws.ports import AwsPort
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.exceptions import InvalidRequestError, LockHeldError, MalformedEventError, RunConflictError
from core.lock import Lease
from core.model import utcnow
from core.runs import (
    LOCK_OPERATION,
    DrainTimeoutPolicy,
    GroupSurge,
    Run,
    RunOptions,
    Selection,
    new_run_id,
    run_id_of_holder,
)
from core.settings import RefresherSettings, parse_duration
from lambdas.common.handler import PerEnvironment, cluster_metrics, lambda_logger, rejected, session_clients
from lambdas.refresher.decide import advance as decide_next
from lambdas.refresher.execute import Effects, execute
from lambdas.refresher.gather import read_groups
from lambdas.refresher.plan import AcquireLock, CreateRun
from lambdas.refresher.request import CancelRequest, RefreshRequest, StatusRequest
from lambdas.refresher.select import format_table, select
from lambdas.refresher.telemetry import RefresherTelemetry
from lambdas.refresher.triggers import Trigger, TriggerKind, parse_trigger
from lambdas.refresher.world import World

logger = lambda_logger()

MAX_PASSES = 500  # decisions per invocation (each one changes the run or waits); a bound, never reached in practice
CONTEXT_MARGIN_SECONDS = 5.0  # stop polling this long before the invocation's timeout


@dataclass
class Deps:
    """Everything ``handle`` needs, built once per execution environment (or by a test).

    Attributes:
        clock: the current time (UTC, aware); sleep: waits between polls (seconds). Tests inject both.
    """

    settings: RefresherSettings
    store: Store
    aws: AwsPort
    telemetry: RefresherTelemetry
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], None] = time.sleep
    runs: RunStore = field(init=False)
    lock: LeaseLock = field(init=False)

    def __post_init__(self) -> None:
        self.runs = RunStore(self.store)
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
        **kwargs: Any,
    ) -> Deps:
        """Build from AWS SDK clients (``dynamodb`` is a resource, for the state table)."""
        metrics = cluster_metrics(settings.cluster_name, metrics)
        return cls(
            settings=settings,
            store=Store(dynamodb.Table(settings.table_name), settings.cluster_name),
            aws=AwsGateway.from_clients(autoscaling, ec2, sqs, settings.queue_url),
            telemetry=RefresherTelemetry(metrics),
            **kwargs,
        )

    @classmethod
    def from_session(cls, settings: RefresherSettings, session: Any, **kwargs: Any) -> Deps:
        """Build the clients from one AWS SDK session (the Lambda's role, region and endpoints)."""
        return cls.from_clients(settings, **session_clients(session), **kwargs)

    def effects(self) -> Effects:
        return Effects(
            store=self.store,
            runs=self.runs,
            lock=self.lock,
            aws=self.aws,
            telemetry=self.telemetry,
            logger=logger,
            ttl_seconds=self.settings.command_ttl_seconds,
        )


# -- reading the world --------------------------------------------------------------------------------------------


def gather(run: Run, deps: Deps, lock_lost: bool = False) -> World:
    """The world a run's next decision needs: every group of the cluster (the masters' check needs them all),
    fresh membership, the ``CMD#`` items of the run's unfinished commands.

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: reads failed.
    """
    now = deps.clock()
    groups = read_groups(deps.aws.autoscaling, deps.aws.ec2, deps.settings.cluster_name)
    nodes = {r.instance_id: r for r in deps.store.list_nodes(deps.settings.membership_max_age_seconds, now)}
    commands = {}
    for step in run.steps:
        if not step.state.in_flight:
            continue
        for command_id in (step.command_id, step.undo_command_id):
            if command_id:
                item = deps.store.get_command(command_id)
                if item is not None:
                    commands[command_id] = item
    return World(groups=groups, nodes=nodes, commands=commands, lock_lost=lock_lost)


def run_summary(run: Run, steps: bool = False) -> dict[str, Any]:
    """A run as the responses and the CLI show it."""
    counts: dict[str, int] = {}
    for step in run.steps:
        counts[step.state.value] = counts.get(step.state.value, 0) + 1
    out: dict[str, Any] = {
        "run_id": run.run_id,
        "status": run.status.value,
        "reason": run.reason,
        "waiting": run.waiting,
        "trigger": run.options.trigger,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "steps": counts,
        "surge": run.surge,
        "surge_instance_ids": run.surge_instance_ids,
        "cancel_requested": run.cancel_requested,
    }
    if steps:
        out["step_details"] = [
            {
                "index": s.index,
                "group": s.group,
                "role": s.role,
                "instance_id": s.instance_id,
                "node_name": s.node_name,
                "needs_update": s.needs_update,
                "state": s.state.value,
                "spare": s.surge_instance_id,
                "drain": s.drain_status,
                "note": s.note,
            }
            for s in run.steps
        ]
    return out


# -- the work -----------------------------------------------------------------------------------------------------


def advance_run(deps: Deps, run_id: str | None, budget_seconds: float) -> dict[str, Any]:
    """Advance the run ``run_id`` (or the active one) until it waits for something not worth polling for, or the
    budget is spent. Renews the cluster lock once.

    Returns:
        ``{"status": "advanced" | "idle", "run": summary, "actions": [...]}``; ``idle`` when there is no active run.
    """
    deadline = time.monotonic() + budget_seconds
    results: list[dict[str, str]] = []
    renewed = False
    lock_lost = False
    run: Run | None = None
    for _ in range(MAX_PASSES):
        run = deps.runs.get(run_id) if run_id else deps.runs.active()
        if run is None or not run.status.active:
            break
        run_id = run.run_id
        if not renewed:
            try:
                deps.lock.acquire(run.holder, LOCK_OPERATION, deps.settings.lock_lease_seconds)
            except LockHeldError as err:
                logger.warning(f"run {run.run_id} lost the cluster lock to {err.holder}")
                lock_lost = True
            renewed = True
        world = gather(run, deps, lock_lost)
        now = deps.clock()
        decision = decide_next(run, world, deps.settings, now)
        if decision.actions:
            try:
                results += execute(decision.actions, deps.effects(), now)
            except RunConflictError:
                logger.info(f"run {run.run_id} was advanced by another invocation: reading it again")
                continue
            if decision.changed:
                continue
        wait = decision.pollable
        if wait is None:
            break
        delay = max(deps.settings.poll_seconds, wait.after_seconds or 0.0)
        if time.monotonic() + delay > deadline:
            break
        deps.sleep(delay)
    if run is None:
        return {"status": "idle", "actions": results}
    final = deps.runs.get(run.run_id) or run
    return {"status": "advanced", "run": run_summary(final), "actions": results}


def options_of(request: RefreshRequest | None, settings: RefresherSettings, trigger: str) -> RunOptions:
    """A run's options: the request's values, else the settings' defaults."""
    policy = DrainTimeoutPolicy(settings.drain_timeout_policy)
    if request is None:
        return RunOptions(
            trigger=trigger,
            selection=Selection.MAX_AGE,
            max_age_seconds=settings.max_age_seconds,
            max_surge=settings.max_surge,
            drain_timeout_seconds=settings.drain_timeout_seconds,
            drain_timeout_policy=policy,
        )
    return RunOptions(
        trigger=trigger,
        selection=Selection.ALL if request.all else Selection.MAX_AGE,
        max_age_seconds=parse_duration(request.max_age) if request.max_age else settings.max_age_seconds,
        instance_groups=request.instance_groups,
        max_surge=request.max_surge or settings.max_surge,
        drain_timeout_seconds=request.drain_timeout_seconds or settings.drain_timeout_seconds,
        drain_timeout_policy=request.drain_timeout_policy or policy,
    )


def start(options: RunOptions, dry_run: bool, deps: Deps, budget_seconds: float) -> dict[str, Any]:
    """Plan a run and, unless ``dry_run``, start it (lock, ``RUN#``) and advance it."""
    active = deps.runs.active()
    if active is not None:
        logger.info(f"refresh asked while run {active.run_id} is active: advancing that one")
        out = advance_run(deps, active.run_id, budget_seconds)
        return {**out, "status": "already_running"}
    now = deps.clock()
    groups = read_groups(deps.aws.autoscaling, deps.aws.ec2, deps.settings.cluster_name, with_launch_facts=True)
    nodes = {r.instance_id: r for r in deps.store.list_nodes(deps.settings.membership_max_age_seconds, now)}
    world = World(groups=groups, nodes=nodes)
    plan = select(options, world, now, options.max_age_seconds or deps.settings.max_age_seconds)
    table = format_table(plan.rows)
    base: dict[str, Any] = {
        "table": table,
        "groups": [asdict(r) for r in plan.rows],
        "steps": [
            {
                "index": s.index,
                "group": s.group,
                "role": s.role,
                "instance_id": s.instance_id,
                "node_name": s.node_name,
                "needs_update": s.needs_update,
            }
            for s in plan.steps
        ],
    }
    logger.info("refresh plan\n" + table, extra={"groups": base["groups"], "steps": len(plan.steps)})
    if plan.refusal and not dry_run:
        logger.warning(f"refresh refused: {plan.refusal}")
        return {**base, "status": "refused", "reason": plan.refusal}
    run_id = new_run_id(now)
    chosen = {s.group for s in plan.steps}
    run = Run(
        run_id=run_id,
        cluster=deps.settings.cluster_name,
        options=options,
        created_at=now,
        updated_at=now,
        groups=[
            GroupSurge(
                name=g.name,
                role=g.role.value,
                instance_group=g.instance_group,
                min_size=g.min_size,
                original_desired=g.desired,
                original_max=g.max_size,
            )
            for g in groups.values()
            if g.name in chosen
        ],
        steps=list(plan.steps),
    )
    actions = [AcquireLock(run.holder, deps.settings.lock_lease_seconds), CreateRun(run)]
    if dry_run:
        results = execute(actions, deps.effects(), now, dry_run=True)
        return {**base, "status": "dry_run", "refusal": plan.refusal, "actions": results}
    if not plan.steps:
        return {**base, "status": "nothing_to_do"}
    try:
        results = execute(actions, deps.effects(), now)
    except LockHeldError as err:
        logger.warning(f"refresh refused: the cluster lock is held by {err.holder}")
        return {**base, "status": "refused", "reason": f"cluster lock held by {err.holder}", "lock": err.current}
    logger.info(
        f"run {run_id} started: {len(plan.steps)} instances to replace",
        extra={"run_id": run_id, "trigger": options.trigger},
    )
    out = advance_run(deps, run_id, budget_seconds)
    return {**base, **out, "status": "started", "actions": results + out["actions"]}


def free_orphan_lock(deps: Deps) -> str | None:
    """Release a lock held by a refresher run that does not exist or is over (a crash between taking the lock and
    writing the run, or between ending the run and releasing). Returns the holder released, if any."""
    item = deps.lock.current() or {}
    run_id = run_id_of_holder(item.get("holder"))
    if run_id is None:
        return None
    run = deps.runs.get(run_id)
    if run is not None and run.status.active:
        return None
    acquired = float(item.get("acquired_at", 0) or 0)
    if deps.clock().timestamp() - acquired < deps.settings.effect_grace_seconds and run is None:
        return None  # a start may be between the lock and the run right now
    deps.lock.release(
        Lease(item["holder"], LOCK_OPERATION, int(item["fencing"]), float(item.get("lease_expires_at", 0)))
    )
    logger.warning(
        f"released the cluster lock of {item['holder']}: its run is " + ("missing" if run is None else run.status.value)
    )
    return str(item["holder"])


def status(request: StatusRequest, deps: Deps) -> dict[str, Any]:
    """Runs (newest first; the newest with its steps), the compensation ledger, the lock, membership."""
    runs = deps.runs.list(request.limit)
    now = deps.clock()
    nodes = deps.store.list_nodes(deps.settings.membership_max_age_seconds, now)
    return {
        "status": "ok",
        "runs": [run_summary(r, steps=(i == 0)) for i, r in enumerate(runs)],
        "lock": deps.lock.current(),
        "ledger": list(deps.store.query_prefix("COMP#", consistent=True)),
        "membership": [
            {
                "instance_id": n.instance_id,
                "node_name": n.node_name,
                "asg": n.asg_name,
                "ready": n.ready,
                "unschedulable": n.unschedulable,
                "roles": n.roles,
            }
            for n in sorted(nodes, key=lambda n: (n.asg_name or "", n.node_name))
        ],
    }


def cancel(request: CancelRequest, deps: Deps, budget_seconds: float) -> dict[str, Any]:
    """Ask the run to stop: steps in flight are finished or undone, then it ends ``cancelled``."""
    for _ in range(10):
        run = deps.runs.get(request.run_id) if request.run_id else deps.runs.active()
        if run is None or not run.status.active:
            return {"status": "refused", "reason": f"no active run{' ' + request.run_id if request.run_id else ''}"}
        try:
            deps.runs.save(run.model_copy(update={"cancel_requested": True, "updated_at": deps.clock()}))
        except RunConflictError:
            continue
        logger.info(f"run {run.run_id}: cancel requested")
        out = advance_run(deps, run.run_id, budget_seconds)
        return {**out, "status": "cancel_requested"}
    raise RunConflictError("the run kept changing while cancelling; try again")


def _budget(deps: Deps, context: LambdaContext | None) -> float:
    budget = deps.settings.wait_budget_seconds
    if context is not None:
        budget = min(budget, context.get_remaining_time_in_millis() / 1000 - CONTEXT_MARGIN_SECONDS)
    return max(0.0, budget)


def dispatch(trigger: Trigger, deps: Deps, budget: float) -> dict[str, Any]:
    settings = deps.settings
    if trigger.kind is TriggerKind.REQUEST:
        request = trigger.request
        if request is None or request.cluster != settings.cluster_name:
            cluster = None if request is None else request.cluster
            return {
                "status": "rejected",
                "reason": "other_cluster",
                "error": f"this function refreshes {settings.cluster_name!r}, not {cluster!r}",
            }
        if isinstance(request, StatusRequest):
            return status(request, deps)
        if isinstance(request, CancelRequest):
            return cancel(request, deps, budget)
        return start(options_of(request, settings, "manual"), request.dry_run, deps, budget)
    if trigger.kind is TriggerKind.SCHEDULE:
        return start(options_of(None, settings, "schedule"), False, deps, budget)
    if trigger.kind is TriggerKind.TICK:
        released = free_orphan_lock(deps)
        out = advance_run(deps, None, budget)
        return {**out, "released_lock": released} if released else out
    if trigger.kind is TriggerKind.AGENT_RESULT:
        if trigger.cluster != settings.cluster_name:
            return {"status": "acknowledged", "reason": "other_cluster"}
        if not (trigger.command_id or "").startswith("refresh-"):
            return {"status": "acknowledged", "reason": "not_ours"}
        out = advance_run(deps, None, budget)
        return out if out["status"] != "idle" else {"status": "acknowledged", "reason": "no_active_run"}
    if trigger.kind is TriggerKind.LAUNCH:
        active = deps.runs.active()
        if active is None:
            return {"status": "acknowledged", "reason": "no_active_run"}
        if trigger.asg_name not in {g.name for g in active.groups}:
            return {"status": "acknowledged", "reason": "not_in_run"}
        return advance_run(deps, active.run_id, budget)
    raise AssertionError(f"unhandled trigger {trigger.kind}")


def handle(event: Any, deps: Deps, context: LambdaContext | None = None) -> dict[str, Any]:
    """Handle one invocation (see the module docstring for the inputs and responses).

    Raises:
        RetryableError: a transient fault; EventBridge delivers the event again.
        AwsRequestError: AWS refused a call for a reason retrying will not fix (e.g. a missing permission).
    """
    telemetry = deps.telemetry
    telemetry.count("InvocationsReceived")
    try:
        try:
            trigger = parse_trigger(event)
        except InvalidRequestError as err:
            logger.warning(f"request rejected: {err}", extra={"reason": err.reason, "errors": err.errors})
            telemetry.count_by("RequestsRejected", "reason", err.reason)
            return {"status": "rejected", "reason": err.reason, "error": str(err), "errors": err.errors}
        except MalformedEventError as err:
            return rejected(err, logger, telemetry, "RequestsRejected")
        if trigger.event_id:
            logger.set_correlation_id(trigger.event_id)
        logger.info(f"invoked by {trigger.describe()}", extra={"trigger": trigger.kind.value})
        response = dispatch(trigger, deps, _budget(deps, context))
        logger.info(
            f"{trigger.describe()}: {response['status']}",
            extra={"status": response["status"], "run": (response.get("run") or {}).get("run_id")},
        )
        return response
    finally:
        telemetry.flush()


# The execution environment's ``Deps``, built on first use (settings read then, never at import).
_deps = PerEnvironment(lambda: Deps.from_session(RefresherSettings.from_env(), new_session()))


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (EventBridge rules and manual invocations). See ``handle``."""
    return handle(event, _deps(), context)
