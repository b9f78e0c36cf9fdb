"""Control-plane drains in the worker (``agent.consumer.worker``), on moto with a scripted engine whose cordon step
answers as ``agent.drain.guard`` would, and a recording lifecycle finisher.

A drain that finds every control-plane slot held is not failed: it waits within its deadline with its node left
uncordoned, its lifecycle action heartbeated, never completed; when the slot frees it drains and only then is the
action completed. A refused one fails and its action is never completed, not even on a duplicate delivery."""

from __future__ import annotations

import threading
from typing import Any

from agent.consumer.decisions import CONTROL_PLANE_REFUSED, DEADLINE_PASSED
from agent.metrics import AgentMetrics
from core.exceptions import ControlPlaneBusyError, ControlPlaneRefusedError
from core.model import Command
from tests.unit.agent.consumer_world import INSTANCE, Clock, ScriptedEngine, World, command, wait_until


class Hooks:
    """Records what a ``HookFinisher`` was asked."""

    def __init__(self) -> None:
        self.heartbeats: list[str] = []
        self.completed: list[tuple[str, str]] = []

    def heartbeat(self, instance_id: str) -> bool:
        self.heartbeats.append(instance_id)
        return True

    def complete(self, instance_id: str, why: str) -> bool:
        self.completed.append((instance_id, why))
        return True


def refusals(metrics: AgentMetrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("node_manager_agent_control_plane_refusals_total", {"reason": reason})
    return value or 0.0


class BusyUntil:
    """A cordon step that finds the slot held until ``free`` is set (and records each try)."""

    def __init__(self, then: Any = None) -> None:
        self.free = threading.Event()
        self.tries = 0
        self.then = then

    def __call__(self, cmd: Command) -> None:
        self.tries += 1
        if self.then is not None:
            self.then(self.tries)
        if not self.free.is_set():
            raise ControlPlaneBusyError("control-plane node m1: 1 control-plane drain(s) already run", ["refresh-1"])


def test_a_refused_master_drain_fails_and_its_lifecycle_action_is_never_completed(world: World) -> None:
    def refuse(cmd: Command) -> None:
        raise ControlPlaneRefusedError("refused: m1 is a control-plane node (reason 'rebalance-recommendation')")

    engine, hooks, metrics = ScriptedEngine(cordon_answer=refuse), Hooks(), AgentMetrics()
    consumer = world.consumer(engine, hooks=hooks, metrics=metrics)
    sent = command("lifecycle-ev-1")
    world.send(sent)
    consumer.handle(world.receive())

    item = world.item("lifecycle-ev-1")
    assert item["status"] == "failed" and item["result"][CONTROL_PLANE_REFUSED] is True
    assert "control-plane node" in item["result"]["message"]
    assert engine.ran == []  # never drained
    assert hooks.completed == []  # CONTINUE would terminate the master undrained
    assert refusals(metrics, "not_allowed") == 1
    assert world.in_queue() == 0

    world.send(sent, record=False)  # delivered again: a duplicate of a finished drain
    consumer.handle(world.receive())
    assert hooks.completed == [] and consumer.counters.snapshot()["duplicate"] == 1


def test_a_master_drain_waits_for_the_slot_untouched_then_drains_and_completes_the_action(world: World) -> None:
    busy = BusyUntil(then=lambda tries: busy.free.set() if tries == 3 else None)
    engine, hooks, metrics = ScriptedEngine(cordon_answer=busy), Hooks(), AgentMetrics()
    consumer = world.consumer(engine, hooks=hooks, metrics=metrics, retry_delay_seconds=0)
    world.send(command("lifecycle-ev-1"))
    consumer.handle(world.receive())

    assert busy.tries == 3 and engine.ran == ["lifecycle-ev-1"]  # drained once the slot was free
    item = world.item("lifecycle-ev-1")
    assert item["status"] == "succeeded" and item["attempt"] == 1 and CONTROL_PLANE_REFUSED not in item["result"]
    assert hooks.completed == [(INSTANCE, "drain lifecycle-ev-1 succeeded")]
    assert refusals(metrics, "busy") == 1  # one wait, counted once
    assert world.in_queue() == 0 and world.receive(world.info.dlq_url) is None


def test_while_it_waits_the_message_stays_owned_and_the_action_is_heartbeated_not_completed(world: World) -> None:
    busy = BusyUntil()
    engine, hooks = ScriptedEngine(cordon_answer=busy), Hooks()
    consumer = world.consumer(engine, hooks=hooks, retry_delay_seconds=1, lifecycle_heartbeat_seconds=0)
    world.send(command("lifecycle-ev-1"))
    message = world.receive()
    worker = threading.Thread(target=consumer.handle, args=(message,))
    worker.start()
    wait_until(lambda: busy.tries >= 1)
    consumer.heartbeat_once()  # what the heartbeat thread does every third of the visibility timeout
    assert hooks.heartbeats == [INSTANCE] and hooks.completed == []
    item = world.item("lifecycle-ev-1")
    assert item["status"] == "running" and engine.ran == []
    assert world.receive() is None  # its message stays invisible: nobody else starts it
    busy.free.set()
    worker.join(10)
    assert world.item("lifecycle-ev-1")["status"] == "succeeded" and hooks.completed != []


def test_a_master_drain_whose_slot_never_frees_times_out_untouched_and_its_action_is_not_completed(
    world: World,
) -> None:
    clock = Clock()
    sent = command("lifecycle-ev-1", deadline_in=60)

    def advance(tries: int) -> None:
        if tries == 2:
            clock.now = sent.deadline  # the deadline passes while it waits

    busy = BusyUntil(then=advance)
    engine, hooks = ScriptedEngine(cordon_answer=busy), Hooks()
    consumer = world.consumer(engine, hooks=hooks, clock=clock, retry_delay_seconds=0)
    world.send(sent)
    consumer.handle(world.receive())

    item = world.item("lifecycle-ev-1")
    assert item["status"] == "timed_out" and item["result"][CONTROL_PLANE_REFUSED] is True
    assert item["result"]["message"].startswith(DEADLINE_PASSED)
    assert engine.ran == [] and hooks.completed == []
    assert world.in_queue() == 0 and world.receive(world.info.dlq_url) is None


def test_a_shutdown_while_it_waits_hands_it_back_untouched(world: World) -> None:
    busy = BusyUntil()
    engine = ScriptedEngine(cordon_answer=busy)
    consumer = world.consumer(engine, retry_delay_seconds=1)
    world.send(command("lifecycle-ev-1"))
    worker = threading.Thread(target=consumer.handle, args=(world.receive(),))
    worker.start()
    wait_until(lambda: busy.tries >= 1)
    consumer.shutdown(grace_seconds=0)
    worker.join(10)
    assert not worker.is_alive() and engine.ran == []
    item = world.item("lifecycle-ev-1")
    assert item["status"] == "queued"  # another agent may start it at once
