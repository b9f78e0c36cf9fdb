"""The consumer's knobs (``ConsumerConfig``), from ``core.settings.AgentSettings``."""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import AgentSettings


@dataclass(frozen=True)
class ConsumerConfig:
    """The consumer's knobs (from ``AgentSettings``; seconds unless named otherwise).

    Attributes:
        cluster: this agent's cluster; commands for another are dropped.
        queue_url: the command queue.
        worker_id: this process's identity in ``CMD#`` items (``<hostname>:<pid>``).
        concurrency: drains evicting at once (slots of ``schedule.DeadlineGate``, earliest deadline first).
        urgent_seconds: a drain whose instance ends at its deadline waits for no slot once its deadline is this
            near (``schedule.urgent_drain``; 0: never).
        node_wait_seconds: how long such a drain whose instance has no node yet waits for one to register, within
            its deadline, before it is skipped (``CommandWorker._cordon_or_wait``; 0: skipped at once).
        max_in_flight: commands taken from the queue and not finished (each has a thread; drains beyond
            ``concurrency`` are cordoned and wait for a slot while the heartbeat keeps their messages invisible).
        wait_seconds: ReceiveMessage WaitTimeSeconds (long poll, 0..20).
        visibility_timeout_seconds: ReceiveMessage VisibilityTimeout, re-extended by the heartbeat.
        stale_running_seconds: a ``running`` item whose heartbeat is older is taken over.
        command_ttl_seconds: TTL (from now) set on a ``CMD#`` item when this agent starts it.
        shutdown_grace_seconds: how long shutdown waits for in-flight commands before handing them back.
        retry_delay_seconds: visibility delay of a command handed back after a retryable error.
        lifecycle_heartbeat_seconds: period of RecordLifecycleActionHeartbeat while a drain runs.
        max_command_seconds: a command's deadline is at most this long after its start (``decisions.capped``).
        command_retry_seconds: how long a step's retryable errors are retried in the agent (``retry.Retry``)
            before the command is handed back.
        retry_backoff_seconds, retry_backoff_max_seconds: that retry's first delay and cap.
        handback_max_seconds: the longest invisibility of a handed-back message (``decisions.handback_delay``:
            ``retry_delay_seconds`` doubled per receive).
        control_plane_poll_seconds: the longest wait between two tries of a control-plane drain waiting for a slot.
    """

    cluster: str
    queue_url: str
    worker_id: str
    concurrency: int = 4
    max_in_flight: int = 64
    urgent_seconds: float = 300.0
    node_wait_seconds: float = 120.0
    wait_seconds: int = 10
    visibility_timeout_seconds: int = 30
    stale_running_seconds: int = 60
    command_ttl_seconds: int = 7 * 86400
    shutdown_grace_seconds: float = 20.0
    retry_delay_seconds: int = 5
    lifecycle_heartbeat_seconds: float = 60.0
    max_command_seconds: int = 3600
    command_retry_seconds: float = 60.0
    retry_backoff_seconds: float = 0.5
    retry_backoff_max_seconds: float = 8.0
    handback_max_seconds: int = 900
    control_plane_poll_seconds: float = 15.0

    @classmethod
    def from_settings(cls, settings: AgentSettings, worker_id: str) -> ConsumerConfig:
        return cls(
            cluster=settings.cluster_name,
            queue_url=settings.queue_url,
            worker_id=worker_id,
            concurrency=settings.concurrency,
            max_in_flight=settings.max_in_flight,
            urgent_seconds=float(settings.drain_urgent_seconds),
            node_wait_seconds=float(settings.node_registration_wait_seconds),
            wait_seconds=settings.poll_wait_seconds,
            visibility_timeout_seconds=settings.visibility_timeout_seconds,
            stale_running_seconds=settings.stale_running_seconds,
            command_ttl_seconds=settings.command_ttl_seconds,
            shutdown_grace_seconds=settings.shutdown_grace_seconds,
            lifecycle_heartbeat_seconds=settings.lifecycle_heartbeat_seconds,
            max_command_seconds=settings.max_command_seconds,
            command_retry_seconds=settings.command_retry_seconds,
            handback_max_seconds=settings.command_handback_max_seconds,
        )

    @property
    def heartbeat_seconds(self) -> float:
        return max(1.0, self.visibility_timeout_seconds / 3)
