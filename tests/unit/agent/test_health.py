"""Probes (pure verdicts, and served over real HTTP), Prometheus exposition, and JSON logs with command context."""

from __future__ import annotations

import io
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from agent.health import KUBERNETES, SQS, Health, HealthServer, HealthSnapshot, liveness, readiness
from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.logs import JsonFormatter, TextFormatter, command_context, configure, current_context
from agent.metrics import AgentMetrics, CountingEvictions


def test_liveness_fails_when_a_loop_went_silent() -> None:
    snapshot = HealthSnapshot(beats={"main": 100.0, "consumer": 50.0})
    assert liveness(snapshot, 110.0, 60).ok
    verdict = liveness(snapshot, 111.0, 60)
    assert not verdict.ok and verdict.problems == ("loop consumer silent for 61 s",)


@pytest.mark.parametrize(
    "snapshot, ok, problem",
    [
        (HealthSnapshot(), False, "leader state unknown"),
        (HealthSnapshot(reached={KUBERNETES: 95.0}, leader=False), True, None),  # a standby needs no SQS
        (HealthSnapshot(reached={KUBERNETES: 95.0}, leader=True), False, "sqs not reached yet"),
        (HealthSnapshot(reached={KUBERNETES: 95.0, SQS: 10.0}, leader=True), False, "sqs not reached for 90 s"),
        (HealthSnapshot(reached={KUBERNETES: 30.0, SQS: 99.0}, leader=True), False, "kubernetes not reached for 70 s"),
        (HealthSnapshot(reached={KUBERNETES: 95.0, SQS: 99.0}, leader=True), True, None),
    ],
)
def test_readiness(snapshot: HealthSnapshot, ok: bool, problem: str | None) -> None:
    verdict = readiness(snapshot, 100.0, 60)
    assert verdict.ok is ok
    if problem:
        assert problem in verdict.problems


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def served() -> Iterator[tuple[HealthServer, Health, AgentMetrics, Clock]]:
    clock = Clock()
    health, metrics = Health(clock), AgentMetrics()
    server = HealthServer(
        health, metrics, port=0, liveness_max_age_seconds=60, readiness_max_age_seconds=30, host="127.0.0.1"
    ).start()
    try:
        yield server, health, metrics, clock
    finally:
        server.stop()


def get(server: HealthServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_the_endpoint_answers_the_probes_and_metrics(served: tuple[HealthServer, Health, AgentMetrics, Clock]) -> None:
    server, health, metrics, clock = served
    assert get(server, "/readyz") == (503, "leader state unknown\nkubernetes not reached yet\n")
    health.beat("main")
    health.reached(KUBERNETES)
    health.set_leader(False)
    assert get(server, "/healthz") == (200, "ok\n")
    assert get(server, "/readyz") == (200, "ok\n")
    health.set_leader(True)
    metrics.leader.set(1)
    assert get(server, "/readyz")[0] == 503  # the leader has not polled SQS yet
    health.reached(SQS)
    assert get(server, "/readyz")[0] == 200
    clock.t += 61
    assert get(server, "/healthz") == (503, "loop main silent for 61 s\n")
    assert get(server, "/readyz")[0] == 503
    health.retire("main")
    assert get(server, "/healthz")[0] == 200
    status, text = get(server, "/metrics")
    assert status == 200 and "node_manager_agent_leader 1.0" in text
    assert get(server, "/nope")[0] == 404


def test_metrics_names_and_eviction_counting() -> None:
    metrics = AgentMetrics()

    class Kube:
        def __init__(self) -> None:
            self.answers = [
                EvictionResponse(EvictionStatus.BLOCKED, 429),
                EvictionResponse(EvictionStatus.EVICTED, 201),
            ]

        def evict_pod(
            self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
        ) -> EvictionResponse:
            return self.answers.pop(0)

        def get_node(self, name: str) -> str:
            return f"node {name}"

    kube = CountingEvictions(Kube(), metrics)
    assert kube.evict_pod("web", "web-1", "uid", None).status is EvictionStatus.BLOCKED
    assert kube.evict_pod("web", "web-1").status is EvictionStatus.EVICTED
    assert kube.get_node("n1") == "node n1"  # everything else is delegated
    metrics.commands_completed.labels(kind="drain", result="succeeded").inc()
    metrics.drain_duration.labels(result="succeeded").observe(12.5)
    text = metrics.render().decode()
    for line in (
        "node_manager_agent_pods_evicted_total 1.0",
        "node_manager_agent_evictions_blocked_total 1.0",
        'node_manager_agent_commands_completed_total{kind="drain",result="succeeded"} 1.0',
        'node_manager_agent_drain_duration_seconds_bucket{le="20.0",result="succeeded"} 1.0',
    ):
        assert line in text
    for name in (
        "node_manager_agent_commands_received_total",
        "node_manager_agent_membership_nodes",
        "node_manager_agent_sqs_poll_errors_total",
        "node_manager_agent_leader",
        "node_manager_agent_messages_dropped_total",
        "node_manager_agent_lifecycle_actions_total",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text


def test_json_lines_carry_the_command_context_also_from_threads_started_in_it() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.agent.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        logger.info("outside")
        with command_context(command_id="spot-1", instance_id="i-0123456789abcdef0", node=None):
            with command_context(node="ip-10-0-1-17.ec2.internal"):
                import contextvars

                worker = threading.Thread(
                    target=contextvars.copy_context().run, args=(logger.info, "from a worker %d", 7), name="evict_0"
                )
                worker.start()
                worker.join()
                try:
                    raise RuntimeError("boom")
                except RuntimeError:
                    logger.exception("failed")
            assert current_context() == {"command_id": "spot-1", "instance_id": "i-0123456789abcdef0"}
        logger.info("after")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["outside", "from a worker 7", "failed", "after"]
    assert "command_id" not in lines[0] and "command_id" not in lines[3]
    for line in lines[1:3]:
        assert line["command_id"] == "spot-1" and line["node"] == "ip-10-0-1-17.ec2.internal"
        assert line["instance_id"] == "i-0123456789abcdef0"
    assert lines[1]["thread"] == "evict_0" and "RuntimeError: boom" in lines[2]["exception"]
    assert lines[0]["level"] == "INFO" and lines[0]["logger"] == "test.agent.logs" and "time" in lines[0]


def test_text_format_appends_the_context_and_configure_replaces_only_its_own_handler() -> None:
    record = logging.LogRecord("agent", logging.INFO, __file__, 1, "hello", None, None)
    with command_context(command_id="spot-1"):
        assert TextFormatter().format(record).endswith("hello [command_id=spot-1]")
    root = logging.getLogger()
    before = [h for h in root.handlers if not getattr(h, "_node_manager_handler", False)]  # e.g. pytest's capture
    level = root.level
    try:
        first = configure("INFO", "json", io.StringIO())
        second = configure("DEBUG", "text", io.StringIO())
        assert first not in root.handlers and second in root.handlers
        assert all(h in root.handlers for h in before)
    finally:
        root.removeHandler(second)
        root.setLevel(level)
