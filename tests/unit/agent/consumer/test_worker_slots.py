"""A cordoned drain waiting for a drain slot (``agent.consumer.worker``, ``schedule.DeadlineGate``): the wait ends at
its deadline. On moto, with a scripted engine."""

from __future__ import annotations

import threading

from agent.consumer.decisions import DEADLINE_PASSED
from core.model import utcnow
from tests.unit.agent.consumer_world import ScriptedEngine, World, command, wait_until


def test_a_drain_whose_deadline_passes_while_every_slot_is_held_ends_timed_out_cordoned(world: World) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine, concurrency=1)
    assert consumer.worker.gate.acquire(utcnow())  # the one slot: a drain a PodDisruptionBudget blocks for an hour
    world.send(command(deadline_in=1.0))
    handler = threading.Thread(target=consumer.handle, args=(world.receive(),), daemon=True)
    handler.start()
    try:
        wait_until(lambda: consumer.worker.gate.waiting() == 1)  # started, cordoned, waiting for the slot
        wait_until(lambda: world.item()["status"] != "running", timeout=5)
    finally:
        consumer.worker.gate.release()
        handler.join(5)
    assert engine.cordoned == ["spot-1"] and engine.ran == []  # cordoned at once, nothing evicted
    item = world.item()
    assert item["status"] == "timed_out" and item["result"]["message"] == DEADLINE_PASSED
    assert world.in_queue() == 0 and consumer.worker.gate.waiting() == 0 and consumer.worker.gate.busy() == 0
