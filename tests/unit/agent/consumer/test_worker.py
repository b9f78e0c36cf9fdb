"""One message to its end (``agent.consumer.worker``): run once, duplicates, skipped, late, refused, taken over,
handed back, notified again. On moto, with a scripted engine (garbage, foreign and forged bodies:
``test_worker_bodies.py``)."""

from __future__ import annotations

import threading
from datetime import timedelta

from agent.consumer.decisions import DEADLINE_PASSED
from agent.drain.results import NodeCommandResult
from agent.metrics import AgentMetrics
from core.exceptions import KubernetesApiError, KubernetesRejectedError, NodeNotFoundError
from core.model import Command, CommandKind, CommandStatus, utcnow
from tests.unit.agent.consumer_world import (
    INSTANCE,
    Clock,
    Gate,
    ScriptedEngine,
    World,
    command,
    succeed,
)


def test_a_drain_runs_once_is_finished_reported_and_deleted(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command())
    world.consumer(engine).handle(world.receive())

    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 1 and item["worker"] == "agent-a:1"
    assert item["result"]["message"] == "drained" and "reported_at" in item
    assert engine.ran == ["spot-1"]
    assert world.in_queue() == 0
    [(detail_type, detail)] = world.observed()
    assert detail_type == "Node Drain Succeeded"
    assert detail["command_id"] == "spot-1" and detail["status"] == "succeeded" and detail["attempt"] == 1
    assert detail["summary"]["evicted"] == 1


def test_a_duplicate_delivery_of_a_finished_command_is_deleted_without_running_again(world: World) -> None:
    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    sent = command()
    world.send(sent)
    consumer.handle(world.receive())
    world.observed()
    world.send(sent, record=False)  # SQS delivers it again
    consumer.handle(world.receive())

    assert engine.ran == ["spot-1"]
    assert world.in_queue() == 0
    assert world.observed() == []
    assert world.item()["attempt"] == 1
    assert consumer.counters.snapshot()["duplicate"] == 1


def test_an_instance_without_node_is_skipped(world: World) -> None:
    def no_node(cmd: Command) -> NodeCommandResult:
        raise NodeNotFoundError(cmd.instance_id)

    world.send(command())
    world.consumer(ScriptedEngine(no_node)).handle(world.receive())
    item = world.item()
    assert item["status"] == "skipped" and INSTANCE in item["result"]["message"]
    [(detail_type, detail)] = world.observed()
    assert detail_type == "Node Drain Skipped" and detail["status"] == "skipped"
    assert world.in_queue() == 0


class RecordingPoster:
    """Stands in for ``agent.events.NodeEventRecorder`` (posting Events for real is covered by the drain tests)."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, CommandKind, CommandStatus, str]] = []

    def __call__(self, node_name: str, kind: CommandKind, status: CommandStatus, message: str) -> None:
        self.posted.append((node_name, kind, status, message))


def test_a_drain_whose_deadline_passed_is_cordoned_and_not_started(world: World) -> None:
    engine = ScriptedEngine()
    poster = RecordingPoster()
    world.send(command(deadline_in=-5))
    world.consumer(engine, poster=poster).handle(world.receive())
    assert engine.cordoned == ["spot-1"]  # its pods must not stay schedulable targets
    assert engine.ran == []
    item = world.item()
    assert item["status"] == "timed_out" and item["result"]["message"] == DEADLINE_PASSED
    [(detail_type, detail)] = world.observed()
    assert detail_type == "Node Drain Failed" and detail["status"] == "timed_out"
    assert poster.posted == [("ip-10-0-1-17.ec2.internal", CommandKind.DRAIN, CommandStatus.TIMED_OUT, DEADLINE_PASSED)]


def test_the_event_on_the_node_is_left_to_the_engine_when_it_posted_one(world: World) -> None:
    poster = RecordingPoster()
    world.send(command())
    world.consumer(ScriptedEngine(), poster=poster).handle(world.receive())
    assert world.item()["status"] == "succeeded" and poster.posted == []


def test_a_request_the_apiserver_refuses_fails_the_command(world: World) -> None:
    def forbidden(cmd: Command) -> NodeCommandResult:
        raise KubernetesRejectedError(403, "patch node ip-10-0-1-17: HTTP 403 forbidden")

    poster = RecordingPoster()
    world.send(command())
    world.consumer(ScriptedEngine(forbidden), poster=poster).handle(world.receive())
    item = world.item()
    assert item["status"] == "failed" and "HTTP 403" in item["result"]["message"]
    assert [t for t, _ in world.observed()] == ["Node Drain Failed"]
    assert [p[2] for p in poster.posted] == [CommandStatus.FAILED]


def test_a_late_uncordon_still_runs(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command(kind="uncordon", deadline_in=-5))
    world.consumer(engine).handle(world.receive())
    assert engine.ran == ["spot-1"] and world.item()["status"] == "succeeded"
    assert [t for t, _ in world.observed()] == ["Node Uncordon Succeeded"]


def test_an_engine_bug_fails_the_command_with_the_error(world: World) -> None:
    def bug(cmd: Command) -> NodeCommandResult:
        raise ZeroDivisionError("oops")

    world.send(command())
    world.consumer(ScriptedEngine(bug)).handle(world.receive())
    item = world.item()
    assert item["status"] == "failed" and item["result"]["errors"] == ["ZeroDivisionError: oops"]
    assert [t for t, _ in world.observed()] == ["Node Drain Failed"]


def test_a_command_running_on_a_live_worker_is_left_alone(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command())
    world.store.start_command(command(), "agent-b:2", stale_after_seconds=60, ttl_seconds=3600)
    consumer = world.consumer(engine)
    consumer.handle(world.receive())
    assert engine.ran == []
    assert world.item()["worker"] == "agent-b:2" and world.item()["status"] == "running"
    assert world.in_queue() == 1  # left; visible again about when agent-b's heartbeat would go stale
    assert consumer.counters.snapshot()["busy_elsewhere"] == 1


def test_a_redundant_copy_of_a_command_a_live_holder_works_is_deleted_not_returned(world: World) -> None:
    """A Lambda's re-send while agent-b drains from its own message: the copy is deleted (returning it would spend
    one of the queue's 3 receives each time, and a long drain would see it dead-lettered with nothing wrong); the
    holder's message stays in flight, the item untouched."""
    engine = ScriptedEngine()
    cmd = command()
    world.send(cmd)
    held = world.receive()
    assert held is not None
    world.store.start_command(cmd, "agent-b:2", stale_after_seconds=60, ttl_seconds=3600, message_id=held["MessageId"])
    world.send(cmd, record=False)  # the re-send
    consumer = world.consumer(engine)
    consumer.handle(world.receive())
    assert engine.ran == []
    item = world.item()
    assert item["worker"] == "agent-b:2" and item["status"] == "running" and item["attempt"] == 1
    assert world.in_queue() == 1  # only the holder's own message, in flight
    assert consumer.counters.snapshot()["redundant"] == 1


def test_the_holders_own_message_is_left_for_when_its_heartbeat_would_be_stale(world: World) -> None:
    """The holder's own message came back (its handback's release failed, or its visibility lapsed): not deleted,
    or the command could be left with no message at all."""
    world.send(command())
    own = world.receive()
    assert own is not None
    world.store.start_command(
        command(), "agent-b:2", stale_after_seconds=60, ttl_seconds=3600, message_id=own["MessageId"]
    )
    world.sqs.change_message_visibility(
        QueueUrl=world.info.queue_url, ReceiptHandle=own["ReceiptHandle"], VisibilityTimeout=0
    )
    consumer = world.consumer(ScriptedEngine())
    consumer.handle(world.receive())
    assert world.in_queue() == 1 and world.receive() is None  # left, invisible until agent-b would be stale
    assert consumer.counters.snapshot()["busy_elsewhere"] == 1 and "redundant" not in consumer.counters.snapshot()


def test_a_jobs_own_message_that_comes_back_is_adopted_and_deleted_at_the_end(world: World) -> None:
    """Its visibility lapsed while this worker drains (a heartbeat's extension failed): the job takes the new
    receipt handle, so the end deletes the message rather than leaving it to come back and be dead-lettered."""
    gate = Gate()
    consumer = world.consumer(ScriptedEngine(gate))
    world.send(command())
    first = world.receive()
    assert first is not None
    worker = threading.Thread(target=consumer.handle, args=(first,))
    worker.start()
    try:
        assert gate.entered.wait(10)
        world.sqs.change_message_visibility(
            QueueUrl=world.info.queue_url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
        )
        again = world.receive()
        assert again is not None and again["MessageId"] == first["MessageId"]
        consumer.handle(again)
        assert consumer.counters.snapshot()["adopted"] == 1
        [job] = consumer.worker.jobs.list()
        assert job.receipt == again["ReceiptHandle"]
        assert world.receive() is None  # kept invisible again
    finally:
        gate.release.set()
        worker.join(10)
    assert world.item()["status"] == "succeeded" and world.in_queue() == 0


def test_a_stale_running_command_is_taken_over_with_the_next_attempt(world: World) -> None:
    world.send(command())
    world.store.start_command(
        command(), "agent-b:2", stale_after_seconds=60, ttl_seconds=3600, now=utcnow() - timedelta(seconds=120)
    )  # agent-b died two minutes ago
    world.consumer(ScriptedEngine()).handle(world.receive())
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2 and item["worker"] == "agent-a:1"
    [(_, detail)] = world.observed()
    assert detail["attempt"] == 2


def test_a_worker_that_lost_its_command_mid_run_reports_nothing(world: World) -> None:
    def taken_over(cmd: Command) -> NodeCommandResult:
        # while this worker drains, another takes the command over (this one's heartbeat looked stale)
        world.store.start_command(
            cmd, "agent-b:2", stale_after_seconds=60, ttl_seconds=3600, now=utcnow() + timedelta(seconds=120)
        )
        return succeed(cmd)

    world.send(command())
    consumer = world.consumer(ScriptedEngine(taken_over))
    consumer.handle(world.receive())
    item = world.item()
    assert item["status"] == "running" and item["worker"] == "agent-b:2" and item["attempt"] == 2
    assert world.observed() == []
    assert world.in_queue() == 1
    assert consumer.counters.snapshot()["lost"] == 1


def test_a_retryable_engine_error_hands_the_command_back(world: World) -> None:
    def apiserver_down(cmd: Command) -> NodeCommandResult:
        raise KubernetesApiError("get node: HTTP 503")

    world.send(command())
    world.consumer(ScriptedEngine(apiserver_down), retry_delay_seconds=0).handle(world.receive())
    item = world.item()
    assert item["status"] == "queued" and item["attempt"] == 1 and "worker" not in item
    assert world.observed() == []

    world.consumer(ScriptedEngine(), worker="agent-b:2").handle(world.receive())  # visible again at once
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2


def test_an_event_not_sent_keeps_the_terminal_status_and_is_sent_when_the_message_returns(world: World) -> None:
    engine = ScriptedEngine()
    world.send(command())
    first = world.receive()
    world.consumer(engine, bus="no-such-bus").handle(first)
    item = world.item()
    assert item["status"] == "succeeded" and "reported_at" not in item
    assert world.in_queue() == 1 and world.observed() == []

    # the visibility timeout lapses; the message comes back 31 s after the command finished
    world.sqs.change_message_visibility(
        QueueUrl=world.info.queue_url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
    )
    clock = Clock()
    clock.now = utcnow() + timedelta(seconds=31)
    world.consumer(engine, clock=clock).handle(world.receive())

    assert engine.ran == ["spot-1"]
    [(detail_type, _)] = world.observed()
    assert detail_type == "Node Drain Succeeded"
    assert "reported_at" in world.item()
    assert world.in_queue() == 0


def test_a_failed_cordon_is_counted_and_the_drain_still_runs_and_decides(world: World) -> None:
    def broken(cmd: Command) -> None:
        raise KubernetesApiError("patch node: HTTP 503")

    engine = ScriptedEngine(cordon_answer=broken)
    metrics = AgentMetrics()
    world.send(command())
    world.consumer(engine, metrics=metrics).handle(world.receive())
    assert engine.cordoned == ["spot-1"] and engine.ran == ["spot-1"]
    assert world.item()["status"] == "succeeded"
    labels = {"loop": "cordon", "error": "KubernetesApiError"}
    assert metrics.registry.get_sample_value("node_manager_agent_loop_errors_total", labels) == 1


def test_a_drain_whose_instance_has_no_node_ends_skipped_at_the_cordon(world: World) -> None:
    def gone(cmd: Command) -> None:
        raise NodeNotFoundError(cmd.instance_id)

    engine = ScriptedEngine(cordon_answer=gone)
    world.send(command())
    world.consumer(engine).handle(world.receive())
    assert engine.ran == [] and world.item()["status"] == "skipped"


def test_a_drain_tightened_before_it_started_starts_with_the_earlier_deadline(world: World) -> None:
    from adapters.dynamo.commands import tighten_deadline

    engine = ScriptedEngine()
    consumer = world.consumer(engine)
    queued = command("rebalance-1", deadline_in=600)
    world.send(queued)
    spot_deadline = (queued.deadline - timedelta(seconds=480)).replace(microsecond=0)
    assert tighten_deadline(world.store, "rebalance-1", spot_deadline, by="spot-1")
    consumer.handle(world.receive())
    [ran] = engine.commands
    assert ran.deadline == spot_deadline and ran.command_id == "rebalance-1"
    assert world.item("rebalance-1")["status"] == "succeeded"


def test_a_copy_received_while_its_job_here_could_not_beat_starts_no_second_drain(world: World) -> None:
    """DynamoDB refused this worker's heartbeats for two minutes while it drains: the item looks stale, and the
    sweeper sends the command again. The copy comes to this very worker, whose job is alive: it is redundant (the
    job's own message covers its end), not a second start of the same drain beside the first (attempt 2 under the
    same worker: two drains of one node, the first's end reported as lost, its control-plane slot released under
    the second)."""
    gate = Gate()
    engine = ScriptedEngine(gate)
    clock = Clock()
    consumer = world.consumer(engine, clock=clock)
    sent = command(deadline_in=600)
    world.send(sent)
    first = world.receive()
    worker = threading.Thread(target=consumer.handle, args=(first,))
    worker.start()
    copy_worker: threading.Thread | None = None
    try:
        assert gate.entered.wait(10)
        clock.now += timedelta(seconds=120)  # its last heartbeat is two minutes old
        world.send(sent, record=False)  # the sweeper's re-send
        copy = world.receive()
        assert copy is not None and copy["MessageId"] != first["MessageId"]
        copy_worker = threading.Thread(target=consumer.handle, args=(copy,))
        copy_worker.start()
        copy_worker.join(3)
        assert engine.ran == ["spot-1"] and world.item()["attempt"] == 1
        assert consumer.counters.snapshot().get("redundant") == 1
    finally:
        gate.release.set()
        worker.join(10)
        if copy_worker is not None:
            copy_worker.join(10)
    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 1 and world.in_queue() == 0
