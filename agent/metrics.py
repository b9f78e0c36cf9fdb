"""The agent's Prometheus metrics (prometheus-client), served at ``/metrics`` by ``agent.health.HealthServer``.

Every metric lives in the ``AgentMetrics``' own registry (tests build as many as they like). Names (counters get
``_total`` appended by the client library; all documented in the README, "Metrics"):

- ``node_manager_agent_commands_received_total{kind}``: commands taken from SQS (parsed, this cluster's).
- ``node_manager_agent_commands_completed_total{kind,result}``: commands finished by this agent; ``result`` is the
  terminal status (``succeeded``, ``failed``, ``timed_out``, ``skipped``).
- ``node_manager_agent_messages_dropped_total{reason}``: messages not run: ``malformed``, ``foreign`` (another
  cluster), ``duplicate`` (a finished command delivered again), ``redundant`` (another copy of a command a live
  holder works from its own message: deleted, ``agent.consumer.decisions.on_refusal``).
- ``node_manager_agent_commands_rejected_total{reason}``: well-formed commands not run because no ``CMD#`` item
  backs them: ``no_record`` (none recorded under the body's command id), ``mismatch`` (the item records another
  cluster, kind, instance, node, deadline or options). The message is left for the dead-letter queue.
- ``node_manager_agent_control_plane_refusals_total{reason}``: drains or cordons of a control-plane node not done
  (``agent.drain.guard``): ``not_allowed`` (not a refresher master step nor a Spot warning or lifecycle hook of the
  node's own instance; the command fails) or ``busy`` (every control-plane drain slot was held; the drain waits).
- ``node_manager_agent_command_retries_total{step}``: retryable Kubernetes, DynamoDB or SQS errors retried in the
  agent (``step``: ``read``, ``start``, ``run``, ``report``) before a command is handed back.
- ``node_manager_agent_drain_duration_seconds{result}``: histogram of drain durations (the engine's
  ``durations.total``).
- ``node_manager_agent_pods_evicted_total``: evictions the API accepted.
- ``node_manager_agent_evictions_blocked_total``: evictions refused with 429 (a PodDisruptionBudget allows no
  disruption now; each refusal counts, the engine retries with backoff).
- ``node_manager_agent_membership_nodes``: nodes in the last membership report (``NODE#`` items written).
- ``node_manager_agent_sqs_poll_errors_total``: failed ReceiveMessage calls.
- ``node_manager_agent_leader``: 1 while this replica holds the leader Lease, else 0.
- ``node_manager_agent_lifecycle_actions_total{action,result}``: CompleteLifecycleAction (``complete``) and
  RecordLifecycleActionHeartbeat (``heartbeat``) calls, ``result`` ``ok``, ``gone`` (no such action any more) or
  ``error``.
- ``node_manager_agent_loop_errors_total{loop,error}``: errors a loop of the agent caught and survived (``loop``:
  ``consumer``, ``cordon``, ``heartbeat``, ``membership``, ``lifecycle``; ``error``: the exception's type, e.g.
  ``AwsUnavailableError``, ``StoreUnavailableError``, ``KubernetesApiError``); each became a retry or a terminal
  status.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from agent.kube.eviction import EvictionResponse, EvictionStatus

PREFIX = "node_manager_agent"
# A Spot drain has 120 s; a lifecycle-hook or refresh drain may take many minutes.
DRAIN_BUCKETS = (1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class AgentMetrics:
    """The metrics of one agent process (names in the module docstring).

    Args:
        registry: where to register; default a new ``CollectorRegistry`` of its own.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.commands_received = Counter(
            f"{PREFIX}_commands_received", "Commands received from SQS, by kind", ["kind"], registry=r
        )
        self.commands_completed = Counter(
            f"{PREFIX}_commands_completed",
            "Commands finished by this agent, by kind and terminal status",
            ["kind", "result"],
            registry=r,
        )
        self.messages_dropped = Counter(
            f"{PREFIX}_messages_dropped",
            "SQS messages not run: malformed, foreign or duplicate",
            ["reason"],
            registry=r,
        )
        self.commands_rejected = Counter(
            f"{PREFIX}_commands_rejected",
            "Commands not run because no CMD# item backs them: no_record or mismatch",
            ["reason"],
            registry=r,
        )
        self.control_plane_refusals = Counter(
            f"{PREFIX}_control_plane_refusals",
            "Drains or cordons of control-plane nodes not done: not_allowed or busy",
            ["reason"],
            registry=r,
        )
        self.command_retries = Counter(
            f"{PREFIX}_command_retries",
            "Retryable errors retried in the agent while working a command, by step",
            ["step"],
            registry=r,
        )
        self.drain_duration = Histogram(
            f"{PREFIX}_drain_duration_seconds",
            "Duration of drains, by result",
            ["result"],
            buckets=DRAIN_BUCKETS,
            registry=r,
        )
        self.pods_evicted = Counter(f"{PREFIX}_pods_evicted", "Evictions accepted by the API", registry=r)
        self.evictions_blocked = Counter(
            f"{PREFIX}_evictions_blocked", "Evictions refused with 429 by a PodDisruptionBudget", registry=r
        )
        self.membership_nodes = Gauge(f"{PREFIX}_membership_nodes", "Nodes in the last membership report", registry=r)
        self.sqs_poll_errors = Counter(f"{PREFIX}_sqs_poll_errors", "Failed SQS ReceiveMessage calls", registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica holds the leader Lease", registry=r)
        self.lifecycle_actions = Counter(
            f"{PREFIX}_lifecycle_actions",
            "Lifecycle hook calls (complete, heartbeat) by result",
            ["action", "result"],
            registry=r,
        )

        self.loop_errors = Counter(
            f"{PREFIX}_loop_errors",
            "Errors a loop of the agent caught and survived, by loop and exception type",
            ["loop", "error"],
            registry=r,
        )
        self.cordons_resolved = Counter(
            f"{PREFIX}_cordons_resolved",
            "Give-back cordons (rebalance recommendations) resolved by the agent, by outcome (released, kept, error)",
            ["outcome"],
            registry=r,
        )

    def loop_error(self, loop: str, err: BaseException) -> None:
        """Count an error ``loop`` caught (by the exception's type name)."""
        self.loop_errors.labels(loop=loop, error=type(err).__name__).inc()

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)

    def record_eviction(self, response: EvictionResponse) -> None:
        """Count one eviction answer (accepted, or blocked by a disruption budget)."""
        if response.status is EvictionStatus.EVICTED:
            self.pods_evicted.inc()
        elif response.status is EvictionStatus.BLOCKED:
            self.evictions_blocked.inc()


class CountingEvictions:
    """The Kubernetes adapter as the drain engine sees it, counting each eviction's answer in ``metrics``.

    Delegates every attribute to ``kube`` (an ``agent.kube.client.KubeAdapter``); only ``evict_pod`` is observed.
    """

    def __init__(self, kube: Any, metrics: AgentMetrics) -> None:
        self._kube = kube
        self._metrics = metrics

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        response: EvictionResponse = self._kube.evict_pod(
            namespace, name, uid=uid, grace_period_seconds=grace_period_seconds
        )
        self._metrics.record_eviction(response)
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)
