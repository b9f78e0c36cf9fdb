"""The agent's Prometheus metrics (``agent.metrics``): names, and evictions counted as they are answered."""

from __future__ import annotations

from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.metrics import AgentMetrics, CountingEvictions


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
