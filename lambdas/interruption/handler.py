"""Entry point of the interruption Lambda: wiring only (settings, clients, logging, metrics, idempotency).

``lambda_handler(event, context)`` is what Lambda calls. On its first invocation it reads ``InterruptionSettings``
from the environment and builds the AWS clients, and keeps them for the life of the execution environment.
``handle(event, deps, now)`` does the work and is what tests call with clients of their own.

Outcomes (the return value; EventBridge invokes asynchronously, so it is only logged):

- ``{"status": "rejected", "reason": "malformed" | "unsupported_event", "error": ...}``: the event does not have
  the documented shape. Logged, counted (``EventsRejected``), and *not* raised, so Lambda does not retry it.
- ``{"status": "acknowledged", "reason": <IgnoreReason>, ...}``: nothing to do (late, foreign, duplicate, ...).
- ``{"status": "acknowledged", "reason": "foreign_account" | "foreign_region" | ...}``: the event is another
  account's or region's (``lambdas.events.scope``); counted (``EventsOutOfScope``), nothing read or done.
- ``{"status": "acted" | "dry_run", "actions": [...], ...}``: the plan was applied (or only logged).
- Transient faults (throttling, DynamoDB or SQS unavailable, the same event being processed concurrently) are
  raised, so Lambda's asynchronous retries (bounded by the function's retry attempts and maximum event age)
  deliver the event again. The idempotency record of a failed invocation is deleted by Powertools, so the retry
  runs again; the table's ``CMD#``/``DETACH#`` records make the rerun complete what the failed one started.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from adapters.aws.clients import lazy_clients, new_session
from adapters.aws.gateway import AwsGateway
from adapters.aws.ports import AwsPort
from adapters.dynamo.commands import commands_for_instance
from adapters.dynamo.hooks import get_hook
from adapters.dynamo.idempotency import persistence_layer
from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from core.exceptions import RetryableError, StoreUnavailableError
from core.model import NodeRecord, utcnow
from core.settings import InterruptionSettings, RebalancePolicy
from lambdas.common.handler import (
    PerEnvironment,
    cluster_metrics,
    deployment_scope,
    direct_caller,
    lambda_logger,
    session_clients,
)
from lambdas.common.prologue import admit, invocation
from lambdas.common.telemetry import Telemetry
from lambdas.events.event import Event, EventKind
from lambdas.events.scope import Scope
from lambdas.interruption.decide import command_id_for, decide
from lambdas.interruption.decide.common import unreadable_command
from lambdas.interruption.execute import Effects, execute
from lambdas.interruption.gather import read_ec2_state, read_instance_facts, read_rebalance_load
from lambdas.interruption.verify import GOING_STATES
from lambdas.interruption.world import InstanceFacts, World

# Powertools Logger: JSON lines with the Lambda context and correlation id (= the event id). Its service name comes
# from POWERTOOLS_SERVICE_NAME; nothing of the product's settings is read here.
logger = lambda_logger()

KINDS = frozenset(
    {
        EventKind.SPOT_INTERRUPTION,
        EventKind.REBALANCE_RECOMMENDATION,
        EventKind.TERMINATE_LIFECYCLE_ACTION,
        EventKind.INSTANCE_STATE_CHANGE,
    }
)  # the events this Lambda acts on; each names its instance (``Event.instance``)

REPLACE_KINDS = frozenset({EventKind.REBALANCE_RECOMMENDATION, EventKind.SPOT_INTERRUPTION})  # read the active run
IDEMPOTENCY_EXPIRY_SECONDS = 3600  # a duplicate within the hour gets the first answer back


@dataclass
class Deps:
    """Everything ``handle`` needs, built once per execution environment (or by a test).

    Attributes:
        settings: the Lambda's settings.
        store: the cluster's partition of the state table.
        aws: the AWS adapter.
        telemetry: metrics.
        idempotency: Powertools idempotency (persistence layer, config), or None to run without it (no
            ``IDEMPOTENCY_TABLE_NAME``); duplicates are then still caught by the ``CMD#``/``DETACH#`` records.
        scope: the account and region the Lambda runs in; events of others are acknowledged, not acted on.
    """

    settings: InterruptionSettings
    store: Store
    aws: AwsPort
    telemetry: Telemetry
    idempotency: tuple[DynamoDBPersistenceLayer, IdempotencyConfig] | None = None
    scope: Scope = field(default_factory=Scope)
    process: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.idempotency is None:
            self.process = process_event
        else:
            layer, config = self.idempotency
            self.process = idempotent_function(
                process_event, data_keyword_argument="event", persistence_store=layer, config=config
            )

    @classmethod
    def from_clients(
        cls,
        settings: InterruptionSettings,
        *,
        dynamodb: Any,
        autoscaling: Any,
        ec2: Any,
        sqs: Any,
        dynamodb_client: Any | None = None,
        metrics: Metrics | None = None,
        region: str | None = None,
    ) -> Deps:
        """Build from AWS SDK clients.

        Args:
            settings: the settings.
            dynamodb: a ``dynamodb`` resource (for the state table).
            autoscaling, ec2, sqs: AWS SDK clients.
            dynamodb_client: a ``dynamodb`` client for the idempotency table (needed when
                ``settings.idempotency_table_name`` is set).
            metrics: a Powertools ``Metrics``; default one whose namespace is ``POWERTOOLS_METRICS_NAMESPACE``.
            region: the deployment's region; default the ``ec2`` client's.
        """
        metrics = cluster_metrics(settings.cluster_name, metrics)
        idempotency = None
        if settings.idempotency_table_name:
            layer = persistence_layer(settings.idempotency_table_name, dynamodb_client)
            config = IdempotencyConfig(
                event_key_jmespath="id", expires_after_seconds=IDEMPOTENCY_EXPIRY_SECONDS, response_hook=_mark_replayed
            )
            idempotency = (layer, config)
        return cls(
            settings=settings,
            store=Store(dynamodb.Table(settings.table_name), settings.cluster_name),
            aws=AwsGateway.from_clients(autoscaling, ec2, sqs, settings.queue_url),
            telemetry=Telemetry(metrics),
            idempotency=idempotency,
            scope=deployment_scope(settings.account_id, region, ec2),
        )

    @classmethod
    def from_session(cls, settings: InterruptionSettings, session: Any) -> Deps:
        """Build the real clients from one AWS SDK session (the Lambda's role, region and endpoints)."""
        clients = {**session_clients(session), **lazy_clients(session, ("dynamodb_client",))}
        return cls.from_clients(settings, **clients, region=getattr(session, "region_name", None))

    def register_context(self, context: LambdaContext | None) -> None:
        """Take the account and region from the context's function ARN (``Scope.with_context``), and let
        idempotency know the invocation's remaining time (an in-progress record then expires with it)."""
        self.scope = self.scope.with_context(context)
        if self.idempotency is not None and context is not None:
            self.idempotency[1].register_lambda_context(context)


def _mark_replayed(response: Any, idempotent_data: DataRecord) -> Any:
    """Powertools response hook: a duplicate answered from the idempotency table says so."""
    if isinstance(response, dict):
        return {**response, "replayed": True}
    return response


# rule 5d: the policies whose cordons are capped (replace: its fallback cordon, when the recommendation is not replaced)
CAPPED_POLICIES = (RebalancePolicy.CORDON, RebalancePolicy.DRAIN, RebalancePolicy.REPLACE)


def gather(notice: Event, deps: Deps) -> World:
    """Read what ``decide`` needs: the instance's ASG facts, membership, and this notice's recorded intents.

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: reads failed.
    """
    membership = None
    item = deps.store.get(f"NODE#{notice.instance}", consistent=False)
    if item is not None:
        try:
            # the agent writes a NODE# item only when it changes: its MEMBERSHIP mark says the item is still current
            membership = NodeRecord.model_validate(item).with_mark(deps.store.membership_mark())
        except ValidationError as err:
            logger.warning("unreadable membership record ignored", extra={"error": str(err)})
    if notice.kind is EventKind.INSTANCE_STATE_CHANGE:
        # every instance of the account changes state: only members going away are looked at further, and what the
        # event claims is then checked with EC2 (one DescribeInstances call, lambdas.interruption.verify)
        if item is None or (notice.instance_state or "") not in GOING_STATES:
            return World(instance=InstanceFacts(notice.instance), membership=membership)
        members = readable_commands(commands_for_instance(deps.store, notice.instance), deps)
        facts = read_ec2_state(deps.aws.ec2, notice.instance)
        return World(instance=facts, membership=membership, commands=members)
    detach = deps.store.get_detach(notice.instance)
    command = deps.store.get_command(command_id_for(notice))
    hook = None
    commands: tuple[dict[str, Any], ...] = ()
    if notice.kind is EventKind.TERMINATE_LIFECYCLE_ACTION:
        hook = get_hook(deps.store, notice.instance)
    if command is None:
        # rules 5a, 5b and 7 look at the instance's other commands (a rebalance cordon or drain, a drain running)
        commands = readable_commands(commands_for_instance(deps.store, notice.instance), deps)
    facts = read_instance_facts(
        deps.aws.autoscaling, deps.aws.ec2, notice.instance, recorded_asg=detach.get("asg_name") if detach else None
    )
    active_run = None
    rebalance_cordons, cluster_nodes = 0, None
    policy = deps.settings.rebalance_policy
    if notice.kind is EventKind.REBALANCE_RECOMMENDATION and command is None and policy in CAPPED_POLICIES:
        rebalance_cordons, cluster_nodes = read_rebalance_load(deps.store, notice.instance)  # rule 5d
    replace = deps.settings.rebalance_policy is RebalancePolicy.REPLACE
    if notice.kind is EventKind.SPOT_INTERRUPTION or (replace and notice.kind in REPLACE_KINDS):
        # a Spot warning for an instance a run (a refresh, a replacement) is replacing gets no early replacement
        # (rule 4); rule 5c: a replacement starts only when no run is active
        active_run = RunStore(deps.store).active()
    return World(
        instance=facts,
        membership=membership,
        command=command,
        detach=detach,
        hook=hook,
        commands=commands,
        active_run=active_run,
        rebalance_cordons=rebalance_cordons,
        cluster_nodes=cluster_nodes,
    )


def readable_commands(items: Iterable[dict[str, Any]], deps: Deps) -> tuple[dict[str, Any], ...]:
    """The ``CMD#`` items the rules can read (``decide.common.unreadable_command``); each other one is logged and
    counted (``Skipped`` by ``reason=unreadable_item``), never raised: the notice is decided without it."""
    kept = []
    for item in items:
        why = unreadable_command(item)
        if why is None:
            kept.append(item)
            continue
        logger.warning(f"unreadable item {item.get('sk', '?')} ignored", extra={"error": why})
        deps.telemetry.count_by("Skipped", "reason", "unreadable_item")
    return tuple(kept)


def process_event(*, event: dict[str, Any], notice: Event, deps: Deps, now: datetime) -> dict[str, Any]:
    """Gather, decide, execute one parsed event. Wrapped by Powertools idempotency on ``event["id"]``.

    Returns:
        The response (JSON-serialisable; it is what a duplicate gets back from the idempotency table).
    """
    world = gather(notice, deps)
    plan = decide(notice, now, deps.settings, world)
    effects = Effects(
        store=deps.store,
        aws=deps.aws,
        telemetry=deps.telemetry,
        logger=logger,
        ttl_seconds=deps.settings.command_ttl_seconds,
    )
    results = execute(plan, effects, now, dry_run=deps.settings.dry_run)
    ack = plan.acknowledged
    response: dict[str, Any] = {
        "status": "acknowledged" if ack else ("dry_run" if deps.settings.dry_run else "acted"),
        "event_id": notice.event_id,
        "kind": notice.kind.value,
        "instance_id": notice.instance,
        "actions": results,
    }
    if ack is not None:
        response["reason"] = ack.reason.value
    logger.info(
        f"{notice.detail_type} {notice.event_id} for {notice.instance}: {response['status']}"
        + (f" ({ack.reason.value})" if ack else f", {len(results)} actions"),
        extra={"status": response["status"], "reason": response.get("reason")},
    )
    return response


def handle(event: Any, deps: Deps, now: datetime | None = None) -> dict[str, Any]:
    """Handle one EventBridge event.

    Args:
        event: the raw event.
        deps: settings, clients and metrics.
        now: the current time (UTC); default the clock. Tests pass it to play late events.

    Returns:
        The response dict (see the module docstring).

    Raises:
        RetryableError: a transient fault; the event should be delivered again.
        AwsRequestError: AWS refused a call for a reason retrying will not fix (e.g. missing permission).
    """
    now = now or utcnow()
    telemetry = deps.telemetry
    with invocation(logger, telemetry, "EventsReceived"):
        notice = admit(event, KINDS, now, logger, telemetry, "EventsRejected", scope=deps.scope)
        if not isinstance(notice, Event):
            return notice
        try:
            response: dict[str, Any] = deps.process(event=dict(event), notice=notice, deps=deps, now=now)
        except IdempotencyAlreadyInProgressError as err:
            raise RetryableError(f"event {notice.event_id} is being handled by another invocation") from err
        except IdempotencyPersistenceLayerError as err:
            raise StoreUnavailableError(f"idempotency table: {err}") from err
        if response.get("replayed"):
            telemetry.count("EventsReplayed")
            logger.info(f"duplicate event {notice.event_id}: answered from the idempotency record")
        return response


# The execution environment's ``Deps``, built on first use (settings read then, never at import).
_deps = PerEnvironment(lambda: Deps.from_session(InterruptionSettings.from_env(), new_session()))


@logger.inject_lambda_context(correlation_id_path="id", clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point (EventBridge target). See ``handle``."""
    deps = _deps()
    deps.register_context(context)
    caller = direct_caller(context)
    if caller is not None:  # EventBridge sends no client context: this is a direct invocation
        logger.warning(f"direct invocation from {caller}", extra={"caller": caller})
    return handle(event, deps)
