"""Transient faults while a command is worked (``agent.consumer.worker`` with ``retry.Retry``): a burst of
retryable DynamoDB and Kubernetes errors is retried with backoff in the agent, so the command still finishes and
nothing is dead-lettered; errors that outlast the retries hand the command back with a visibility that doubles per
receive. On moto (the queue's maxReceiveCount is 3, as deployed)."""

from __future__ import annotations

import time
from typing import Any

from adapters.dynamo.store import Store
from agent.metrics import AgentMetrics
from core.exceptions import KubernetesApiError, StoreUnavailableError
from core.model import Command
from tests.unit.agent.consumer_world import ScriptedEngine, World, command, succeed


class FlakyStore(Store):
    """The cluster's table, throttling the first ``failures[method]`` calls of each method named."""

    def __init__(self, table: Any, cluster: str, failures: dict[str, int]) -> None:
        super().__init__(table, cluster)
        self.failures = dict(failures)

    def _maybe_fail(self, name: str) -> None:
        if self.failures.get(name, 0) > 0:
            self.failures[name] -= 1
            raise StoreUnavailableError(f"{name}: ProvisionedThroughputExceededException")

    def get_command(self, command_id: str) -> dict[str, Any] | None:
        self._maybe_fail("get_command")
        return super().get_command(command_id)

    def start_command(self, *args: Any, **kwargs: Any) -> int:
        self._maybe_fail("start_command")
        return super().start_command(*args, **kwargs)

    def finish_command(self, *args: Any, **kwargs: Any) -> None:
        self._maybe_fail("finish_command")
        super().finish_command(*args, **kwargs)

    def release_command(self, *args: Any, **kwargs: Any) -> None:
        self._maybe_fail("release_command")
        super().release_command(*args, **kwargs)


def failing_runs(times: int) -> Any:
    runs: list[int] = []

    def answer(cmd: Command) -> Any:
        runs.append(1)
        if len(runs) <= times:
            raise KubernetesApiError("get node: HTTP 503")
        return succeed(cmd)

    return answer


def retries(metrics: AgentMetrics, step: str) -> float:
    return metrics.registry.get_sample_value("node_manager_agent_command_retries_total", {"step": step}) or 0.0


def test_a_burst_of_retryable_errors_during_a_drain_is_absorbed_and_nothing_is_dead_lettered(world: World) -> None:
    world.store = FlakyStore(world.store.table, world.store.cluster, {"get_command": 2, "start_command": 2})
    world.store.failures["finish_command"] = 5  # more than the reporter's own tries (4)
    engine, metrics = ScriptedEngine(failing_runs(6)), AgentMetrics()
    consumer = world.consumer(
        engine, metrics=metrics, command_retry_seconds=30, retry_backoff_seconds=0.01, retry_backoff_max_seconds=0.05
    )
    world.send(command())
    consumer.handle(world.receive())  # one receive: without retries each of these errors cost one (3 dead-letter it)

    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 1
    assert len(engine.ran) == 7
    assert world.in_queue() == 0 and world.receive(world.info.dlq_url) is None
    assert [retries(metrics, s) for s in ("read", "start", "run", "report")] == [2, 2, 6, 1]


def visible(world: World) -> int:
    attrs = world.sqs.get_queue_attributes(
        QueueUrl=world.info.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])  # read without receiving (no receive counted)


def test_errors_that_outlast_the_retries_hand_it_back_later_each_time_and_it_still_finishes(world: World) -> None:
    engine = ScriptedEngine(failing_runs(2))
    consumer = world.consumer(engine, command_retry_seconds=0, retry_delay_seconds=1)
    world.send(command())
    invisible: list[float] = []
    counts: list[str] = []
    while True:
        message = world.receive()
        assert message is not None, "dead-lettered"
        counts.append(message["Attributes"]["ApproximateReceiveCount"])
        consumer.handle(message)
        if world.item()["status"] != "queued":
            break
        handed_back = time.monotonic()
        while visible(world) == 0:
            time.sleep(0.05)
        invisible.append(time.monotonic() - handed_back)
    assert world.item()["status"] == "succeeded" and len(engine.ran) == 3
    assert counts == ["1", "2", "3"]
    assert 0.7 <= invisible[0] < 1.7 and 1.7 <= invisible[1] < 2.9, invisible  # 1 s, then 2 s
    assert world.in_queue() == 0 and world.receive(world.info.dlq_url) is None


def test_a_throttled_handback_is_retried_so_the_command_is_queued_for_anyone_at_once(world: World) -> None:
    world.store = FlakyStore(world.store.table, world.store.cluster, {"release_command": 2})
    engine = ScriptedEngine(failing_runs(100))
    consumer = world.consumer(
        engine,
        command_retry_seconds=0.3,
        retry_delay_seconds=1,
        retry_backoff_seconds=0.01,
        retry_backoff_max_seconds=0.02,
    )
    world.send(command())
    consumer.handle(world.receive())  # the drain's errors outlast the retries: handed back, its release throttled

    item = world.item()
    # not left running under this worker until its heartbeat is stale
    assert item["status"] == "queued" and item.get("worker") is None, item
    assert world.store.failures["release_command"] == 0


def test_a_worker_takes_again_the_command_its_own_failed_handback_left_running(world: World) -> None:
    world.store = FlakyStore(world.store.table, world.store.cluster, {"release_command": 1000})
    engine = ScriptedEngine(failing_runs(1))
    consumer = world.consumer(engine, command_retry_seconds=0, retry_delay_seconds=1)
    world.send(command())
    consumer.handle(world.receive())  # handed back, the release refused: still running under this worker
    assert world.item()["status"] == "running"

    message = None
    while message is None:
        message = world.receive()  # back after 1 s, long before the heartbeat is stale
    consumer.handle(message)

    item = world.item()
    assert item["status"] == "succeeded" and item["attempt"] == 2, item
    assert len(engine.ran) == 2 and world.receive(world.info.dlq_url) is None
