"""What a received message is trusted for (``agent.consumer.worker``): its body only names a command, the stored
``CMD#`` record is what runs; a forged body, a body that differs from its record, garbage and another cluster's
command are not run, logged, counted and acknowledged or left for the dead-letter queue; a far-future deadline is
capped. On moto, with a scripted engine (``test_worker.py`` has the rest of a message's life)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from agent.metrics import AgentMetrics
from core.model import Command, CommandKind, DrainOptions, utcnow
from tests.unit.agent.consumer_world import (
    INSTANCE,
    ScriptedEngine,
    World,
    command,
)


def rejected(metrics: AgentMetrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("node_manager_agent_commands_rejected_total", {"reason": reason})
    return value or 0.0


def test_a_forged_body_with_no_record_is_not_run_and_ends_in_the_dead_letter_queue(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    engine = ScriptedEngine()
    metrics = AgentMetrics()
    consumer = world.consumer(engine, metrics=metrics)
    world.send(command("forged-1", deadline_in=10 * 365 * 86400), record=False)  # no Lambda recorded it
    handled = 0
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        while (message := world.receive()) is not None:  # never deleted: visible again at once after each attempt
            consumer.handle(message)
            handled += 1
            assert handled <= 3
    assert handled == 3  # maxReceiveCount: the 4th receive moved it to the DLQ
    dead = world.receive(world.info.dlq_url)
    assert dead is not None and '"forged-1"' in dead["Body"]
    assert engine.ran == []
    assert world.store.get_command("forged-1") is None  # nothing recorded on its behalf
    assert consumer.counters.snapshot()["rejected_no_record"] == 3
    assert rejected(metrics, "no_record") == 3 and rejected(metrics, "mismatch") == 0
    assert "command rejected" in caplog.text and "reason=no_record" in caplog.text


def test_a_forged_body_for_another_instance_under_a_real_command_id_is_rejected(world: World) -> None:
    engine = ScriptedEngine()
    metrics = AgentMetrics()
    consumer = world.consumer(engine, metrics=metrics)
    real = command()
    world.store.record_command(real, ttl_seconds=3600)  # the Lambda's record, its message not arrived yet
    before = world.item()
    forged = real.model_copy(update={"instance_id": "i-0fedcba9876543210", "node_name": None})
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody=forged.model_dump_json())
    consumer.handle(world.receive())

    assert engine.ran == []
    assert world.item() == before  # still queued, attempt 0, the recorded instance: nothing changed
    assert world.in_queue() == 1  # left for the dead-letter queue
    assert consumer.counters.snapshot()["rejected_mismatch"] == 1 and rejected(metrics, "mismatch") == 1
    assert world.observed() == []

    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody=real.model_dump_json())  # the Lambda's message
    while (message := world.receive()) is not None:
        consumer.handle(message)
    assert engine.commands == [real]  # the recorded instance, once
    assert world.item()["status"] == "succeeded" and world.item()["instance_id"] == INSTANCE
    dead = world.receive(world.info.dlq_url)
    assert dead is not None and Command.model_validate_json(dead["Body"]) == forged


@pytest.mark.parametrize(
    "change",
    [
        {"instance_id": "i-0fedcba9876543210"},
        {"kind": CommandKind.CORDON},
        {"deadline": utcnow() + timedelta(days=3650)},
        {"node_name": "ip-10-0-9-9.ec2.internal"},
        {"options": DrainOptions(grace_period_seconds=0)},
    ],
)
def test_a_body_that_differs_from_its_record_is_not_run(world: World, change: dict[str, object]) -> None:
    engine = ScriptedEngine()
    metrics = AgentMetrics()
    consumer = world.consumer(engine, metrics=metrics)
    world.store.record_command(command(), ttl_seconds=3600)
    body = command().model_copy(update=change)
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody=body.model_dump_json())
    consumer.handle(world.receive())
    assert engine.ran == []
    assert world.item()["status"] == "queued" and world.item()["attempt"] == 0
    assert world.in_queue() == 1
    assert rejected(metrics, "mismatch") == 1


def test_the_stored_command_is_what_runs(world: World) -> None:
    engine = ScriptedEngine()
    recorded = command()
    world.store.record_command(recorded, ttl_seconds=3600)
    body = recorded.model_copy(update={"reason": "forged free text"})  # not a bound field: the record's is used
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody=body.model_dump_json())
    world.consumer(engine).handle(world.receive())
    assert engine.commands == [recorded]
    assert world.item()["status"] == "succeeded" and world.in_queue() == 0


def test_a_far_future_deadline_is_capped_for_the_engine_and_the_record_keeps_its_own(world: World) -> None:
    """A recorded drain due in ten years (grace 0 behind a PDB would hold a worker for ever) runs with its deadline
    at most MAX_COMMAND_SECONDS away; what is reported is still the recorded command."""
    engine = ScriptedEngine()
    far = command(deadline_in=10 * 365 * 86400)
    world.send(far)
    before = utcnow()
    world.consumer(engine, max_command_seconds=600).handle(world.receive())
    [ran] = engine.commands
    assert before + timedelta(seconds=600) <= ran.deadline <= utcnow() + timedelta(seconds=600)
    assert ran.model_copy(update={"deadline": far.deadline}) == far
    assert world.item()["command"]["deadline"] == far.model_dump(mode="json")["deadline"]


def test_garbage_is_logged_and_ends_in_the_dead_letter_queue(world: World, caplog: pytest.LogCaptureFixture) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody="{not json")
    handled = 0
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        while (message := world.receive()) is not None:  # visible again at once after each attempt
            consumer.handle(message)
            handled += 1
            assert handled <= 3
    assert handled == 3  # maxReceiveCount: the 4th receive moved it to the DLQ
    dead = world.receive(world.info.dlq_url)
    assert dead is not None and dead["Body"] == "{not json"
    assert engine.ran == []
    assert consumer.counters.snapshot()["malformed"] == 3
    assert f"message_id={dead['MessageId']}" in caplog.text and "'{not json'" in caplog.text


def test_a_command_for_another_cluster_is_dropped_with_a_log_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    world.sqs.send_message(
        QueueUrl=world.info.queue_url, MessageBody=command(cluster="other.k8s.local").model_dump_json()
    )
    with caplog.at_level(logging.WARNING, logger="agent.consumer"):
        consumer.handle(world.receive())
    assert engine.ran == []
    assert world.in_queue() == 0
    assert world.store.get_command("spot-1") is None
    assert "command for another cluster dropped" in caplog.text and "other.k8s.local" in caplog.text
    assert consumer.counters.snapshot()["foreign"] == 1
