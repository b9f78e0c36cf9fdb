"""A copy of a command whose job here is ending (``agent.consumer.answers.WorkerBase._held_here``): its end claimed,
its terminal write not through yet. On moto, with a scripted engine."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from tests.unit.agent.consumer_world import Clock, ScriptedEngine, World, command


def test_a_copy_received_while_its_job_here_writes_its_end_starts_no_second_drain(world: World) -> None:
    """DynamoDB refused the job's heartbeats, then holds its terminal write (throttled, retried): the item looks
    stale, the sweeper sends the command again, and the copy reaches this worker while the job's end is claimed
    but not written. The job still holds the command: the copy must not start it again (attempt 2 under the same
    worker, a second drain of a node the first just ended), and the job's end is recorded, not lost."""
    engine = ScriptedEngine()
    clock = Clock()
    consumer = world.consumer(engine, clock=clock)
    reporter = consumer.worker.reporter
    reporting, release = threading.Event(), threading.Event()
    report = reporter.report

    def held_report(*args: Any, **kwargs: Any) -> bool:
        if not reporting.is_set():  # the first end is held; any other goes through
            reporting.set()
            assert release.wait(10)
        return bool(report(*args, **kwargs))

    reporter.report = held_report  # type: ignore[method-assign]
    sent = command(deadline_in=600)
    world.send(sent)
    first = world.receive()
    worker = threading.Thread(target=consumer.handle, args=(first,))
    worker.start()
    try:
        assert reporting.wait(10)  # the drain ended; its end is claimed, its write held
        clock.now += timedelta(seconds=120)  # its last heartbeat is two minutes old
        world.send(sent, record=False)  # the sweeper's re-send
        copy = world.receive()
        assert copy is not None and copy["MessageId"] != first["MessageId"]
        consumer.handle(copy)
        assert engine.ran == ["spot-1"] and world.item()["attempt"] == 1
    finally:
        release.set()
        worker.join(10)
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 1 and world.in_queue() == 0
