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
        assert world.item()["heartbeat_at"] == pytest.approx(clock.now.timestamp())

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
