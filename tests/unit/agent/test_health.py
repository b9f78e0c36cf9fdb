"""Probes (pure verdicts, and served over real HTTP), Prometheus exposition, and JSON logs with command context."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from agent.health import KUBERNETES, SQS, Health, HealthServer, HealthSnapshot, liveness, readiness
from agent.metrics import AgentMetrics


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
