"""The heartbeat (``agent.consumer.heartbeat``): keeps a running command's message and item alive, notices a
takeover."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest

from tests.unit.agent.consumer_world import (
    Clock,
    Gate,
    ScriptedEngine,
    World,
    command,
)


def test_the_heartbeat_keeps_the_command_alive_and_notices_a_takeover(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate()
    clock = Clock()
    consumer = world.consumer(ScriptedEngine(gate), clock=clock)
    world.send(command())
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    try:
        assert gate.entered.wait(10)
        clock.now = clock.now + timedelta(seconds=20)
        consumer.heartbeat_once()
        assert world.item()["heartbeat_at"] == pytest.approx(clock.now.timestamp(), abs=0.01)

        world.store.start_command(
            command(), "agent-b:2", stale_after_seconds=1, ttl_seconds=3600, now=clock.now + timedelta(seconds=5)
        )
        with caplog.at_level(logging.WARNING, logger="agent.consumer"):
            consumer.heartbeat_once()
        assert "command taken over by another worker" in caplog.text
    finally:
        gate.release.set()
        worker.join(10)
    assert world.item()["worker"] == "agent-b:2" and world.item()["status"] == "running"
    assert world.observed() == []


class TighteningEngine(ScriptedEngine):
    """A scripted engine that also takes tightened deadlines, as ``DrainEngine.tighten`` does."""

    def __init__(self, gate: Gate) -> None:
        super().__init__(gate)
        self.tightened: list[tuple[str, object]] = []

    def tighten(self, command_id: str, when: object) -> bool:
        self.tightened.append((command_id, when))
        return True


def test_a_deadline_tightened_in_the_record_reaches_the_running_drain(world: World) -> None:
    from adapters.dynamo.commands import tighten_deadline

    gate = Gate()
    engine = TighteningEngine(gate)
    consumer = world.consumer(engine)
    running = command("rebalance-1", deadline_in=600)
    world.send(running)
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    try:
        assert gate.entered.wait(10)
        consumer.heartbeat_once()
        assert engine.tightened == []  # nothing tightened yet
        spot_deadline = (running.deadline - timedelta(seconds=480)).replace(microsecond=0)
        assert tighten_deadline(world.store, "rebalance-1", spot_deadline, by="spot-1")
        consumer.heartbeat_once()
        assert engine.tightened == [("rebalance-1", spot_deadline)]
    finally:
        gate.release.set()
        worker.join(10)


def test_a_failed_visibility_extension_still_renews_the_items_heartbeat(world: World) -> None:
    """SQS refusing the extension (throttled, or the receipt handle outdated because the message came back) must not
    make a live worker look dead: the item's heartbeat goes on, or the sweep and another receive would take the
    command over while it still runs here."""

    class Refusing:
        def __init__(self, queue: object) -> None:
            self.queue = queue

        def set_visibility(self, receipt: str, seconds: int) -> None:
            raise RuntimeError("ThrottlingException")

    gate = Gate()
    clock = Clock()
    consumer = world.consumer(ScriptedEngine(gate), clock=clock)
    consumer.heartbeat.queue = Refusing(consumer.queue)  # type: ignore[assignment]  # the one call a beat makes
    world.send(command())
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    try:
        assert gate.entered.wait(10)
        clock.now = clock.now + timedelta(seconds=20)
        consumer.heartbeat_once()
        assert world.item()["heartbeat_at"] == pytest.approx(clock.now.timestamp(), abs=0.01)
    finally:
        gate.release.set()
        worker.join(10)
    assert world.item()["status"] == "succeeded"
