"""The receive loop (``agent.consumer.loop``): concurrency, SQS errors, shutdown handing commands back."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from agent.drain.results import NodeCommandResult
from core.model import Command
from tests.unit.agent.consumer_world import (
    Gate,
    ScriptedEngine,
    World,
    command,
    succeed,
    wait_until,
)


def test_shutdown_hands_in_flight_commands_back_to_another_agent(world: World) -> None:
    gate = Gate()
    consumer = world.consumer(ScriptedEngine(gate))
    world.send(command())
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    try:
        assert gate.entered.wait(10)
        consumer.shutdown(grace_seconds=0)
        item = world.item()
        assert item["status"] == "queued" and "worker" not in item
        message = world.receive()  # visible again at once
        assert message is not None
    finally:
        gate.release.set()
        worker.join(10)
    assert world.item()["status"] == "queued"  # the first agent's late result was dropped
    assert world.observed() == []

    world.consumer(ScriptedEngine(), worker="agent-b:2").handle(message)
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2 and item["worker"] == "agent-b:2"
    assert len(world.observed()) == 1


def test_the_poll_loop_runs_every_command_once_within_its_concurrency(world: World) -> None:
    def slow(cmd: Command) -> NodeCommandResult:
        time.sleep(0.3)
        return succeed(cmd)

    engine = ScriptedEngine(slow)
    consumer = world.consumer(engine, concurrency=2, wait_seconds=1)
    ids = [f"spot-{i}" for i in range(5)]
    for command_id in ids:
        world.send(command(command_id))
    world.sqs.send_message(QueueUrl=world.info.queue_url, MessageBody="garbage")
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run, args=(stop,))
    loop.start()
    try:
        wait_until(
            lambda: all(world.item(i)["status"] == "succeeded" for i in ids) and world.in_queue() == 0, timeout=20
        )
    finally:
        stop.set()
        loop.join(10)
        consumer.shutdown(grace_seconds=5)
    assert not loop.is_alive()
    assert sorted(engine.ran) == ids
    assert 1 <= engine.max_active <= 2
    assert sorted(d["command_id"] for _, d in world.observed()) == ids
    assert world.receive(world.info.dlq_url)["Body"] == "garbage"


def test_the_poll_loop_survives_sqs_errors_and_still_stops(world: World, caplog: pytest.LogCaptureFixture) -> None:
    consumer = world.consumer(ScriptedEngine(), queue_url=world.info.queue_url + "-deleted")
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run, args=(stop,))
    with caplog.at_level(logging.ERROR, logger="agent.consumer"):
        loop.start()
        try:
            wait_until(lambda: "consecutive_failures=2" in caplog.text)
        finally:
            stop.set()
            loop.join(10)
    assert not loop.is_alive()
    assert "receive failed, backing off seconds=1.0 consecutive_failures=1" in caplog.text
    assert "NonExistentQueue" in caplog.text or "does not exist" in caplog.text


def test_every_drain_is_cordoned_at_once_and_drains_run_earliest_deadline_first(world: World) -> None:
    """One drain slot, held by a drain that blocks: the 8 drains received meanwhile are all cordoned (the consumer
    keeps receiving), then run in deadline order, whatever order SQS delivered them in."""
    gate = Gate()
    engine = ScriptedEngine(gate)
    consumer = world.consumer(engine, concurrency=1, max_in_flight=20, wait_seconds=1)
    world.send(command("first", deadline_in=300))
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run, args=(stop,))
    loop.start()
    try:
        assert gate.entered.wait(10)
        lefts = [200, 90, 150, 60, 250, 120, 100, 180]
        for i, left in enumerate(lefts):
            world.send(command(f"wave-{i}", deadline_in=left))
        wait_until(lambda: len(engine.cordoned) == 1 + len(lefts) and consumer.worker.gate.waiting() == len(lefts))
        assert engine.ran == ["first"]  # all cordoned while the one slot is busy
        gate.release.set()
        wait_until(lambda: len(engine.ran) == 1 + len(lefts) and world.in_queue() == 0, timeout=20)
    finally:
        gate.release.set()
        stop.set()
        loop.join(10)
        consumer.shutdown(grace_seconds=5)
    by_left = [f"wave-{i}" for _, i in sorted((left, i) for i, left in enumerate(lefts))]
    assert engine.ran == ["first", *by_left]


def test_no_drain_of_a_wave_evicts_before_every_command_received_with_it_is_cordoned(world: World) -> None:
    """Two warnings received together: the first node's drain does not start evicting while the second node's cordon
    is still being written (a pod evicted from the first could be placed onto the second meanwhile)."""
    blocked = threading.Event()
    unblock = threading.Event()
    cordons_done: list[str] = []
    done_when_run: dict[str, list[str]] = {}

    def cordon(cmd: Command) -> None:
        if cmd.command_id == "slow":
            blocked.set()
            assert unblock.wait(10)
        cordons_done.append(cmd.command_id)

    def run(cmd: Command) -> NodeCommandResult:
        done_when_run[cmd.command_id] = list(cordons_done)
        return succeed(cmd)

    engine = ScriptedEngine(run, cordon_answer=cordon)
    consumer = world.consumer(engine, concurrency=4, max_in_flight=20, wait_seconds=1)
    world.send(command("fast", deadline_in=60))
    world.send(command("slow", deadline_in=120))
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run, args=(stop,))
    loop.start()
    try:
        assert blocked.wait(10)
        wait_until(lambda: consumer.worker.cordons.waiting() == 1 or "fast" in engine.ran)
        unblock.set()
        wait_until(lambda: len(engine.ran) == 2 and world.in_queue() == 0, timeout=20)
    finally:
        unblock.set()
        stop.set()
        loop.join(10)
        consumer.shutdown(grace_seconds=5)
    assert "slow" in done_when_run["fast"], done_when_run  # its evictions began after the other node's cordon
    assert consumer.worker.cordons.pending() == 0
