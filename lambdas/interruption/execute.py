"""The executor: applies a plan's actions in order. The only place with effects, and the only place dry-run lives.

Races between concurrent deliveries of one event are settled here by the table's conditional writes:

- ``RecordCommand`` losing (``CommandExistsError``): the ``SendCommand`` that follows is still done when the
  recorded command is ``queued`` (the agent tolerates a second message through the ``CMD#`` status), and dropped
  otherwise. What it sends is the command as recorded (the agent runs only a body that matches its item).
- ``TightenCommand`` losing because the drain ended meanwhile: its fallback (the Spot warning's own drain) is
  recorded and sent as ``RecordCommand`` + ``SendCommand`` would, so a drain that ended before the Spot warning never
  leaves the node undrained. Losing to an earlier deadline already set on a drain still queued or running: nothing
  more (one drain, not two; sent again while queued).
- ``ResolveCordon`` losing (a resolution is already recorded, e.g. the agent gave the cordon back first): nothing.
- ``StartReplacement`` / ``JoinReplacement`` (``lambdas.interruption.replacement``) refused (the lock held by
  another operation, another run active, the run already recorded by an earlier delivery): counted
  ``ReplacementsRefused`` (reason ``lock_or_run``; a refusal by the decision, a ``Skip`` of step ``replacement``,
  is counted with its own reason) and logged; the rebalance cordon that follows stays (the fallback), unless the
  decision found rule 5d's cap reached (``capped_cordon``) and no run replaces the instance: then it is neither
  recorded nor sent, counted ``EventsIgnored`` (``rebalance_capped``), as the decision's own capped fallback.
- ``StartReplacement`` / ``JoinReplacement`` whose ``RUN#`` save is refused (too large or invalid:
  ``RunRecordRefusedError``): not retried (it would be refused at every delivery), logged, counted
  ``RunRecordRefused`` (by ``code``) and ``ReplacementsRefused`` (reason ``run_record_refused``), a joined run paused
  with the reason (``replacement.replacement_refused``); the cordon stays.
- ``RecordDetach`` losing (the ``DETACH#`` item exists): the detach and mark that follow are dropped; the
  invocation that won does them (if it crashes, the redelivered event finds the record ``intended`` and completes
  it).

Errors from the store or AWS propagate (retryable ones make the invocation fail, so Lambda retries the event).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.aws.ports import AwsPort
from adapters.dynamo.commands import cancel_queued_command, recorded_command, resolve_cordon, tighten_deadline
from adapters.dynamo.hooks import Finish, finish, record_hook
from adapters.dynamo.store import Store
from core.clock import aware_time
from core.detach import DetachState
from core.exceptions import CommandExistsError, RunRecordRefusedError
from core.lifecycle import LifecycleAction
from core.model import Command, CommandStatus
from lambdas.common.execute import apply_in_order
from lambdas.common.telemetry import Telemetry
from lambdas.interruption.decide import Plan
from lambdas.interruption.decide.rebalance import REPLACEMENT
from lambdas.interruption.plan import (
    EFFECTS,
    Acknowledge,
    Action,
    AwaitDrain,
    CancelCommand,
    CompleteHook,
    DetachInstance,
    ForgetNode,
    IgnoreReason,
    JoinReplacement,
    MarkDetached,
    RecordCommand,
    RecordDetach,
    RecordHook,
    ResolveCordon,
    SendCommand,
    Skip,
    SkipReason,
    StartReplacement,
    TightenCommand,
)
from lambdas.interruption.replacement import (
    RECORD_REFUSED,
    join_replacement,
    replaced_by_a_run,
    replacement_refused,
    start_replacement,
)

CLAIMER = "interruption-lambda"
TERMINAL = frozenset(s.value for s in CommandStatus if s.terminal)  # the statuses a drain ends in


@dataclass(frozen=True)
class Effects:
    """What the executor acts with.

    Attributes:
        store: the cluster's table partition.
        aws: the AWS adapter.
        telemetry: metrics.
        logger: a Powertools ``Logger`` (or any ``logging.Logger``-like object).
        ttl_seconds: TTL of the ``CMD#`` and ``DETACH#`` items (``COMMAND_TTL_SECONDS``).
    """

    store: Store
    aws: AwsPort
    telemetry: Telemetry
    logger: Any
    ttl_seconds: int


def execute(plan: Plan, effects: Effects, now: datetime, dry_run: bool = False) -> list[dict[str, str]]:
    """Apply ``plan`` in order.

    Args:
        plan: from ``decide.decide``.
        effects: store, AWS adapter, telemetry, logger.
        now: the invocation's time, written into records.
        dry_run: log what would be done, change nothing (acknowledgements are still logged and counted).

    Returns:
        One ``{"action": <description>, "result": <what happened>}`` per action, in order.

    Raises:
        StoreUnavailableError, AwsUnavailableError: transient faults (the event should be retried).
        AwsRequestError: AWS refused a call (permissions, validation).
    """
    unsent: set[str] = set()  # command ids whose SendCommand must be dropped
    undetached: set[str] = set()  # instance ids whose detach steps must be dropped
    recorded: dict[str, Command] = {}  # command id -> the command an earlier delivery recorded (sent instead)
    return apply_in_order(
        plan.actions,
        lambda action: _apply(action, effects, now, unsent, undetached, recorded),
        effects=EFFECTS,
        logger=effects.logger,
        dry_run=dry_run,
    )


def _apply(
    action: Action,
    effects: Effects,
    now: datetime,
    unsent: set[str],
    undetached: set[str],
    recorded: dict[str, Command],
) -> str:
    if isinstance(action, RecordCommand):
        if action.command.command_id in unsent:  # a capped fallback cordon whose replacement was refused
            return f"not recorded ({IgnoreReason.REBALANCE_CAPPED.value})"
        try:
            effects.store.record_command(action.command, effects.ttl_seconds, now=now)
        except CommandExistsError as err:
            status = (err.current or {}).get("status")
            if status == CommandStatus.QUEUED.value:
                if (stored := recorded_command(err.current)) is not None:
                    recorded[action.command.command_id] = stored
                return "already recorded, still queued: sending"
            unsent.add(action.command.command_id)
            return f"already recorded with status {status}: not sending"
        return "recorded"
    if isinstance(action, SendCommand):
        if action.command.command_id in unsent:
            return "not sent (another delivery handled it, or it was not recorded)"
        message_id = effects.aws.queue.send_command(recorded.get(action.command.command_id, action.command))
        effects.telemetry.count("CommandsQueued")
        return f"sent (message {message_id})"
    if isinstance(action, RecordDetach):
        if not effects.store.record_detach(
            action.instance_id, action.asg_name, action.reason, effects.ttl_seconds, now=now
        ):
            undetached.add(action.instance_id)
            return "already recorded: another delivery detaches"
        return "recorded"
    if isinstance(action, DetachInstance):
        if action.instance_id in undetached:
            return "not done (another delivery detaches)"
        if effects.aws.autoscaling.detach_instance(action.instance_id, action.asg_name):
            effects.telemetry.count("InstancesDetached")
            return "detached"
        return "was no longer in the group"
    if isinstance(action, MarkDetached):
        if action.instance_id in undetached:
            return "not done (another delivery detaches)"
        effects.store.mark_detached(action.instance_id, DetachState.DETACHED, now=now)
        return "marked"
    if isinstance(action, RecordHook):
        if record_hook(effects.store, action.action, effects.ttl_seconds, now=now):
            return "recorded"
        return "already recorded"
    if isinstance(action, CompleteHook):
        return _complete_hook(action.action, effects, now)
    if isinstance(action, AwaitDrain):
        # the agent may have looked for HOOK# before RecordHook wrote it: if the drain ended meanwhile, finish here
        status = (effects.store.get_command(action.command_id) or {}).get("status")
        # a status of no known kind or shape (the agent partition: a list or a map is unhashable) is not an end
        if isinstance(status, str) and status in TERMINAL:
            return f"drain already {status}: " + _complete_hook(action.action, effects, now)
        return "left to the agent (it completes the action when the drain ends)"
    if isinstance(action, ForgetNode):
        effects.store.delete_node(action.instance_id)
        effects.telemetry.count("MembershipForgotten")
        return "deleted"
    if isinstance(action, CancelCommand):
        if cancel_queued_command(effects.store, action.command_id, action.why, now=now):
            effects.telemetry.count("CommandsCancelled")
            return "cancelled"
        return "no longer queued: left to the agent"
    if isinstance(action, TightenCommand):
        by = action.fallback.command_id
        if tighten_deadline(effects.store, action.command_id, action.deadline, by, now=now):
            effects.telemetry.count("CommandsTightened")
            return "tightened" + _resend_if_queued(action.command_id, effects)
        earlier = _tightened_earlier(action.command_id, action.deadline, effects)
        if earlier is not None:  # still active, bound to an earlier deadline already: one drain, not two
            return f"already tightened to {earlier}" + _resend_if_queued(action.command_id, effects)
        fallback = action.fallback
        recorded_now = _apply(RecordCommand(fallback), effects, now, unsent, undetached, recorded)
        sent = _apply(SendCommand(fallback), effects, now, unsent, undetached, recorded)
        return f"no longer running: {fallback.command_id} {recorded_now}, {sent}"
    if isinstance(action, ResolveCordon):
        if resolve_cordon(effects.store, action.command_id, action.resolution, now=now):
            effects.telemetry.count("CordonsResolved")
            return "resolved"
        return "already resolved"
    if isinstance(action, StartReplacement | JoinReplacement):
        try:
            if isinstance(action, StartReplacement):
                done, what = start_replacement(action, effects.store, now)
            else:
                done, what = join_replacement(action, effects.store, now)
        except RunRecordRefusedError as err:  # nothing written; a retry would be refused the same way
            effects.telemetry.count_by("ReplacementsRefused", "reason", RECORD_REFUSED)
            refused = replacement_refused(
                action, err, effects.store, now, telemetry=effects.telemetry, logger=effects.logger
            )
            dropped = _drop_capped_cordon(action, effects, unsent)
            return refused.replace("; the cordon stays", dropped) if dropped else refused
        if done:
            effects.telemetry.count("ReplacementsStarted")
        else:  # the rebalance cordon that follows in the plan stays: the fallback (unless past the cap)
            effects.telemetry.count_by("ReplacementsRefused", "reason", "lock_or_run")
            what += _drop_capped_cordon(action, effects, unsent) or "; the cordon stays"
            effects.logger.info(f"replacement refused: {what}")
        return what
    if isinstance(action, Acknowledge):
        effects.telemetry.count_by("EventsIgnored", "reason", action.reason.value)
        if action.reason is IgnoreReason.UNVERIFIED:
            effects.telemetry.count("EventsRefused")  # what the event claimed, EC2 denied (lambdas.interruption.verify)
            effects.logger.warning(f"event refused: {action.detail}", extra={"reason": action.reason.value})
        return "acknowledged"
    if isinstance(action, Skip):
        if action.step == REPLACEMENT:  # REBALANCE_POLICY=replace refused by the decision (rule 5c): cordon only
            effects.telemetry.count_by("ReplacementsRefused", "reason", action.reason.value)
        if action.reason is SkipReason.COMMAND_UNREADABLE:  # as handler.readable_commands counts the others
            effects.telemetry.count_by("Skipped", "reason", "unreadable_item")
            effects.logger.warning(f"unreadable item ignored: {action.detail}", extra={"reason": action.reason.value})
        return "skipped"
    raise TypeError(f"unknown action {action!r}")


def _complete_hook(action: LifecycleAction, effects: Effects, now: datetime) -> str:
    """Finish the lifecycle action (``adapters.dynamo.hooks.finish``: claim, CompleteLifecycleAction(CONTINUE),
    record); a failed call puts the claim back and is raised (the event is retried)."""
    outcome = finish(effects.store, action, CLAIMER, effects.aws.autoscaling.complete_lifecycle_action, now=now)
    if outcome is Finish.CLAIMED_ELSEWHERE:
        return "claimed by another finisher (or not pending)"
    if outcome is Finish.COMPLETED:
        effects.telemetry.count("LifecycleActionsCompleted")
        return "completed with CONTINUE"
    return "Auto Scaling no longer has the action"


def _drop_capped_cordon(action: StartReplacement | JoinReplacement, effects: Effects, unsent: set[str]) -> str:
    """A refused replacement's fallback cordon past rule 5d's cap (``action.capped_cordon``) is dropped: its command id
    joins ``unsent``, so the ``RecordCommand`` and ``SendCommand`` that follow do nothing, as under ``cordon``; unless
    the active run replaces the instance (an earlier delivery started or joined it). Returns the note for the
    action's result ("" when the action carries no capped cordon)."""
    if action.capped_cordon is None:
        return ""
    instance = action.run.steps[0].instance_id if isinstance(action, StartReplacement) else action.step.instance_id
    if replaced_by_a_run(effects.store, instance):
        return "; the cordon stays (a run replaces the instance)"
    unsent.add(action.capped_cordon)
    effects.telemetry.count_by("EventsIgnored", "reason", IgnoreReason.REBALANCE_CAPPED.value)
    return f"; {IgnoreReason.REBALANCE_CAPPED.value}: its fallback cordon {action.capped_cordon} is not recorded"


def _tightened_earlier(command_id: str, deadline: datetime, effects: Effects) -> str | None:
    """The ``deadline_tightened_to`` of a drain still ``queued`` or ``running`` whose tightening to ``deadline``
    (aware) was refused because it already has one no later (a redelivered warning stamped ahead of our clock asks a
    later deadline, a second warning of the instance another), else None: the drain ended, or its value is no aware
    ISO 8601 time (the agent partition; the agent reads it as absent, so nothing binds the drain): the fallback drain
    is recorded instead."""
    item = effects.store.get_command(command_id) or {}
    active = item.get("status") in (CommandStatus.QUEUED.value, CommandStatus.RUNNING.value)
    earlier = aware_time(item.get("deadline_tightened_to"))
    return earlier.isoformat() if active and earlier is not None and earlier <= deadline else None


def _resend_if_queued(command_id: str, effects: Effects) -> str:
    """A drain tightened before the agent started it (still ``queued``) is sent again as recorded: its message may
    wait behind the agent's in-flight bound, or be invisible for a hand-back's delay (up to
    ``COMMAND_HANDBACK_MAX_SECONDS``), while its deadline is now the Spot warning's two minutes. A second message is
    harmless (the agent starts a command once, ``Store.start_command``); the agent reads the tightened deadline from
    the item when it starts it (``decisions.tightened``). Returns the note for the action's result."""
    item = effects.store.get_command(command_id)
    if item is None or item.get("status") != CommandStatus.QUEUED.value:
        return ""
    recorded_now = recorded_command(item)
    if recorded_now is None:
        return ""
    message_id = effects.aws.queue.send_command(recorded_now)
    effects.telemetry.count("CommandsQueued")
    return f"; still queued: sent again (message {message_id})"
