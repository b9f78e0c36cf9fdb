"""The executor: order, races settled by the table's conditional writes, dry run (moto for the effects)."""

from __future__ import annotations

from datetime import timedelta

from core.model import Command
from lambdas.interruption.decide import Plan
from lambdas.interruption.execute import execute
from lambdas.interruption.plan import (
    Acknowledge,
    DetachInstance,
    IgnoreReason,
    MarkDetached,
    RecordCommand,
    RecordDetach,
    SendCommand,
)
from tests.unit.lambdas.interruption.effects_world import NOW, command, instance, messages


def test_actions_are_applied_in_order(effects):
    victim = instance(effects)
    cmd = command(victim)
    plan = Plan(
        (
            RecordCommand(cmd),
            SendCommand(cmd),
            RecordDetach(victim, "nodes", "r"),
            DetachInstance(victim, "nodes"),
            MarkDetached(victim),
        )
    )
    results = execute(plan, effects, NOW)
    assert [r["result"] for r in results][:3] == ["recorded", results[1]["result"], "recorded"]
    assert results[1]["result"].startswith("sent (message ")
    assert [r["result"] for r in results][3:] == ["detached", "marked"]
    assert effects.store.get_command("spot-ev")["status"] == "queued"
    assert effects.store.get_detach(victim)["state"] == "detached"
    assert len(messages(effects)) == 1


def test_losing_the_command_record_to_a_started_command_drops_the_send(effects):
    cmd = command(instance(effects))
    effects.store.record_command(cmd, 3600, now=NOW)
    effects.store.start_command(cmd, "agent", stale_after_seconds=60, ttl_seconds=3600, now=NOW)
    results = execute(Plan((RecordCommand(cmd), SendCommand(cmd))), effects, NOW)
    assert results[0]["result"] == "already recorded with status running: not sending"
    assert results[1]["result"] == "not sent (another delivery handled it, or it was not recorded)"
    assert messages(effects) == []


def test_losing_the_command_record_to_a_queued_command_still_sends(effects):
    cmd = command(instance(effects))
    effects.store.record_command(cmd, 3600, now=NOW)
    execute(Plan((RecordCommand(cmd), SendCommand(cmd))), effects, NOW)
    assert len(messages(effects)) == 1


def test_a_command_sent_again_is_the_recorded_one(effects):
    cmd = command(instance(effects))
    effects.store.record_command(cmd, 3600, now=NOW)
    again = cmd.model_copy(update={"node_name": "ip-10-0-1-99.ec2.internal"})  # membership changed meanwhile
    execute(Plan((RecordCommand(again), SendCommand(again))), effects, NOW)
    [message] = messages(effects)
    assert Command.model_validate_json(message["Body"]) == cmd  # the agent runs only a body matching its item


def test_losing_the_detach_record_drops_the_detach(effects):
    victim = instance(effects)
    effects.store.record_detach(victim, "nodes", "other delivery", 3600, now=NOW)
    results = execute(
        Plan((RecordDetach(victim, "nodes", "r"), DetachInstance(victim, "nodes"), MarkDetached(victim))), effects, NOW
    )
    assert [r["result"] for r in results] == [
        "already recorded: another delivery detaches",
        "not done (another delivery detaches)",
        "not done (another delivery detaches)",
    ]
    assert instance(effects) == victim
    assert effects.store.get_detach(victim)["state"] == "intended"


def test_dry_run_only_describes(effects):
    victim = instance(effects)
    cmd = command(victim)
    plan = Plan(
        (
            RecordCommand(cmd),
            SendCommand(cmd),
            RecordDetach(victim, "nodes", "r"),
            DetachInstance(victim, "nodes"),
            MarkDetached(victim),
            Acknowledge(IgnoreReason.DUPLICATE),
        )
    )
    results = execute(plan, effects, NOW, dry_run=True)
    assert [r["action"] for r in results] == plan.describe()
    assert [r["result"] for r in results] == ["dry run: not done"] * 5 + ["acknowledged"]
    assert effects.store.get_command("spot-ev") is None and effects.store.get_detach(victim) is None
    assert messages(effects) == [] and instance(effects) == victim


def test_a_tightened_drain_sends_no_second_drain(effects):
    from lambdas.interruption.plan import TightenCommand

    victim = instance(effects)
    running = command(victim).model_copy(update={"command_id": "rebalance-ev", "deadline": NOW + timedelta(hours=1)})
    effects.store.record_command(running, 3600, now=NOW)
    effects.store.start_command(running, "agent", stale_after_seconds=60, ttl_seconds=3600, now=NOW)
    spot = command(victim)
    results = execute(Plan((TightenCommand("rebalance-ev", spot.deadline, spot),)), effects, NOW)
    assert results[0]["result"] == "tightened"
    assert effects.store.get_command("rebalance-ev")["deadline_tightened_to"] == spot.deadline.isoformat()
    assert effects.store.get_command("spot-ev") is None and messages(effects) == []


def test_a_drain_tightened_before_the_agent_started_it_is_sent_again(effects):
    """Still queued: its message may wait behind the agent's in-flight bound or a hand-back's delay (up to 15
    minutes) while its deadline is now two minutes away; a second message is harmless (one start)."""
    from lambdas.interruption.plan import TightenCommand

    victim = instance(effects)
    queued = command(victim).model_copy(update={"command_id": "rebalance-ev", "deadline": NOW + timedelta(hours=1)})
    effects.store.record_command(queued, 3600, now=NOW)
    spot = command(victim)
    results = execute(Plan((TightenCommand("rebalance-ev", spot.deadline, spot),)), effects, NOW)
    assert results[0]["result"].startswith("tightened; still queued: sent again (message ")
    [message] = messages(effects)
    assert Command.model_validate_json(message["Body"]) == queued  # as recorded: the agent binds it to the item
    assert effects.store.get_command("spot-ev") is None


def test_a_drain_that_ended_before_the_tightening_gets_the_spot_drain_instead(effects):
    from core.model import CommandStatus
    from lambdas.interruption.plan import TightenCommand

    victim = instance(effects)
    ended = command(victim).model_copy(update={"command_id": "rebalance-ev", "deadline": NOW + timedelta(hours=1)})
    effects.store.record_command(ended, 3600, now=NOW)
    attempt = effects.store.start_command(ended, "agent", stale_after_seconds=60, ttl_seconds=3600, now=NOW)
    effects.store.finish_command("rebalance-ev", "agent", attempt, CommandStatus.TIMED_OUT, {}, now=NOW)
    spot = command(victim)
    results = execute(Plan((TightenCommand("rebalance-ev", spot.deadline, spot),)), effects, NOW)
    assert results[0]["result"].startswith("no longer running: spot-ev recorded, sent (message ")
    assert effects.store.get_command("spot-ev")["status"] == "queued"
    [message] = messages(effects)
    assert Command.model_validate_json(message["Body"]) == spot


def test_a_cordon_is_resolved_once(effects):
    from lambdas.interruption.plan import ResolveCordon

    effects.store.record_command(command(instance(effects)), 3600, now=NOW)
    plan = Plan((ResolveCordon("spot-ev", "escalated by x"), ResolveCordon("spot-ev", "instance stopping")))
    assert [r["result"] for r in execute(plan, effects, NOW)] == ["resolved", "already resolved"]
    assert effects.store.get_command("spot-ev")["resolution"] == "escalated by x"


def test_a_drain_already_tightened_to_an_earlier_deadline_gets_no_second_drain(effects):
    """A redelivered warning (or a second warning for the instance) asks a later deadline than the one the drain
    already has: a warning stamped ahead of our clock counts its deadline from when it is decided, so a redelivery
    asks a later one. The drain is still running, already bound to the earlier deadline: one drain, not two."""
    from lambdas.interruption.plan import TightenCommand

    victim = instance(effects)
    running = command(victim).model_copy(update={"command_id": "rebalance-ev", "deadline": NOW + timedelta(hours=1)})
    effects.store.record_command(running, 3600, now=NOW)
    effects.store.start_command(running, "agent", stale_after_seconds=60, ttl_seconds=3600, now=NOW)
    spot = command(victim)
    execute(Plan((TightenCommand("rebalance-ev", spot.deadline, spot),)), effects, NOW)
    later = spot.deadline + timedelta(seconds=30)
    results = execute(Plan((TightenCommand("rebalance-ev", later, spot),)), effects, NOW + timedelta(seconds=30))
    assert results[0]["result"].startswith("already tightened")
    assert effects.store.get_command("rebalance-ev")["deadline_tightened_to"] == spot.deadline.isoformat()
    assert effects.store.get_command("spot-ev") is None and messages(effects) == []


def test_awaiting_a_drain_whose_item_now_holds_a_status_of_no_known_kind_is_left_to_the_agent(effects):
    """The drain's ``CMD#`` item is read again after the hook is recorded; the agent partition is written by more
    than this Lambda (the agent's role, another version), and a status no ``CommandStatus`` names failed the
    invocation at every delivery of the lifecycle action instead of leaving it to the agent (or its timeout)."""
    from core.lifecycle import LifecycleAction
    from lambdas.interruption.plan import AwaitDrain

    victim = instance(effects)
    drain = command(victim)
    effects.store.record_command(drain, 3600, now=NOW)
    effects.store.table.update_item(
        Key={"pk": effects.store.agent_pk, "sk": "CMD#spot-ev"},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": "paused-by-a-later-version"},
    )
    action = LifecycleAction(instance_id=victim, asg_name="nodes", hook_name="node-manager-drain", token="t-1")
    [result] = execute(Plan((AwaitDrain(action, "spot-ev"),)), effects, NOW)
    assert result["result"].startswith("left to the agent")
