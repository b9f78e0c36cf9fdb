"""A cordoned drain waiting for a drain slot (``agent.consumer.worker``, ``schedule.DeadlineGate``): the wait ends at
its deadline, and a deadline tightened meanwhile moves it and is what the engine gets. On moto, with a scripted
engine."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from adapters.dynamo.commands import tighten_deadline
from agent.consumer.decisions import DEADLINE_PASSED
from agent.consumer.jobs import Job
from agent.consumer.schedule import POLL_SECONDS
from agent.drain.engine import DrainEngine
from core.model import Command, DrainOptions, utcnow
from core.settings import AgentSettings
from tests.unit.agent.consumer_world import ScriptedEngine, World, command, wait_until
from tests.unit.agent.drain.fakecluster import FakeCluster


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


class NotRunningEngine(ScriptedEngine):
    """``DrainEngine.tighten``'s answer for a drain that waits for a slot: no such drain runs here."""

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[tuple[str, str]] = []

    def tighten(self, command_id: str, when: datetime) -> bool:
        return False

    def mark_ending(self, node_name: str, command_id: str) -> None:
        self.marked.append((node_name, command_id))


def test_a_drain_tightened_while_it_waits_for_a_slot_starts_first_tightened_and_marked_ending(world: World) -> None:
    engine = NotRunningEngine()
    consumer = world.consumer(engine, concurrency=1)
    assert consumer.worker.gate.acquire(utcnow())  # the one slot is held
    refresh = command("refresh-r1-0", deadline_in=1800).model_copy(
        update={"options": DrainOptions(uncordon_on_failure=True)}
    )
    world.send(refresh)
    world.send(command("lifecycle-1", deadline_in=600))
    handlers = [threading.Thread(target=consumer.handle, args=(world.receive(),), daemon=True) for _ in range(2)]
    for handler in handlers:
        handler.start()
    wait_until(lambda: consumer.worker.gate.waiting() == 2)
    spot_deadline = (utcnow() + timedelta(seconds=120)).replace(microsecond=0)
    assert tighten_deadline(world.store, "refresh-r1-0", spot_deadline, by="spot-9")
    consumer.heartbeat_once()  # the engine runs no such drain: the waiting job is tightened
    assert engine.marked == [(refresh.node_name, "refresh-r1-0")]  # its cordon: instance-ending from now on
    consumer.worker.gate.release()
    for handler in handlers:
        handler.join(10)
    assert engine.ran == ["refresh-r1-0", "lifecycle-1"]  # earliest deadline first, as tightened
    ran = engine.commands[0]
    assert ran.deadline == spot_deadline and not ran.options.uncordon_on_failure
    assert world.item("refresh-r1-0")["status"] == "succeeded"


def test_a_running_drain_is_not_tightened_as_a_waiting_one(world: World) -> None:
    engine = NotRunningEngine()
    consumer = world.consumer(engine)
    job = Job("m", "r", command("refresh-r1-0", deadline_in=1800), 1)
    ran = job.begin_run()
    item = {"deadline_tightened_to": (utcnow() + timedelta(seconds=60)).isoformat()}
    assert job.tighten(item) is None and job.command is ran  # handed to the engine: DrainEngine.tighten's part now
    assert not consumer.worker.tighten_waiting(job, item) and engine.marked == []


def _with_reason(cmd: Command, reason: str) -> Command:
    return cmd.model_copy(update={"reason": reason})


def test_a_spot_drain_starts_at_once_over_the_slots_while_a_drain_that_can_wait_waits(world: World) -> None:
    """A wave larger than the slots: the drains whose instances are reclaimed in two minutes do not queue behind
    drains that hold a slot while their pods take their grace periods (they were left to start after their
    deadline: 72 of 200 at 64 slots, 60 s graces); a refresh drain still waits for its slot."""
    engine = ScriptedEngine()
    consumer = world.consumer(engine, concurrency=1)
    assert consumer.worker.gate.acquire(utcnow())  # the one slot: a drain waiting for its pods
    world.send(_with_reason(command("refresh-r1-0", deadline_in=1800), "refresh r1 step 0"))
    world.send(_with_reason(command("spot-1", deadline_in=120), "spot-interruption:terminate"))
    handlers = [threading.Thread(target=consumer.handle, args=(world.receive(),), daemon=True) for _ in range(2)]
    try:
        for handler in handlers:
            handler.start()
        wait_until(lambda: world.item("spot-1")["status"] == "succeeded")
        # the refresh drain waits for the slot (its handler may reach the gate after the Spot drain ended)
        wait_until(lambda: consumer.worker.gate.waiting() == 1)
        assert engine.ran == ["spot-1"]
        assert consumer.worker.counters.snapshot().get("urgent_over_bound") == 1
    finally:
        consumer.worker.gate.release()
        for handler in handlers:
            handler.join(10)
    assert engine.ran == ["spot-1", "refresh-r1-0"]
    assert consumer.worker.gate.busy() == 0


def test_a_lifecycle_drain_waits_its_turn_until_its_deadline_is_near_and_zero_turns_it_off(world: World) -> None:
    """A termination lifecycle action's drain ends its instance too, but with an hour left it waits for a slot;
    with ``DRAIN_URGENT_SECONDS=0`` a Spot drain waits as well."""
    engine = ScriptedEngine()
    consumer = world.consumer(engine, concurrency=1, urgent_seconds=0)
    assert consumer.worker.gate.acquire(utcnow())
    world.send(_with_reason(command("spot-1", deadline_in=120), "spot-interruption:terminate"))
    handler = threading.Thread(target=consumer.handle, args=(world.receive(),), daemon=True)
    handler.start()
    wait_until(lambda: consumer.worker.gate.waiting() == 1)
    assert engine.ran == []  # urgency turned off: behind the slot
    consumer.worker.gate.release()
    handler.join(10)
    assert engine.ran == ["spot-1"]

    hooked = world.consumer(ScriptedEngine(), concurrency=1)
    assert hooked.worker.gate.acquire(utcnow())
    world.send(_with_reason(command("lifecycle-1", deadline_in=3600), "asg-lifecycle:nodes-a"))
    handler = threading.Thread(target=hooked.handle, args=(world.receive(),), daemon=True)
    handler.start()
    try:
        wait_until(lambda: hooked.worker.gate.waiting() == 1)
        time.sleep(2 * POLL_SECONDS)  # the waiter looked at its urgency again: an hour left, not urgent
        assert hooked.worker.gate.waiting() == 1 and "urgent_over_bound" not in hooked.worker.counters.snapshot()
    finally:
        hooked.worker.gate.release()
        handler.join(10)
    assert world.item("lifecycle-1")["status"] == "succeeded"


def test_the_consumer_tells_the_engine_its_drains_in_flight(world: World) -> None:
    engine = DrainEngine(FakeCluster(), AgentSettings(cluster_name="demo", table_name="t", queue_url="q"))
    consumer = world.consumer(engine)  # type: ignore[arg-type]
    assert engine.drains_in_flight() == frozenset()
    consumer.worker.jobs.add(Job("m1", "r1", command("refresh-r1-0", deadline_in=1800), 1))
    consumer.worker.jobs.add(Job("m2", "r2", command("uncordon-1", kind="uncordon"), 1))
    assert engine.drains_in_flight() == {"refresh-r1-0"}  # cordoned and waiting: its cordon is left by an uncordon
