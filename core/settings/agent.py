"""Settings of the in-cluster agent."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from core.settings.base import _COMMON_ENV, LogFormat, PdbDeadlinePolicy, _Settings


class AgentSettings(_Settings):
    """Settings of the in-cluster agent."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        "event_bus_name": "EVENT_BUS_NAME",
        "concurrency": "AGENT_CONCURRENCY",
        "max_in_flight": "AGENT_MAX_IN_FLIGHT",
        "drain_urgent_seconds": "DRAIN_URGENT_SECONDS",
        "node_registration_wait_seconds": "NODE_REGISTRATION_WAIT_SECONDS",
        "kube_qps": "AGENT_KUBE_QPS",
        "kube_burst": "AGENT_KUBE_BURST",
        "poll_wait_seconds": "SQS_WAIT_SECONDS",
        "visibility_timeout_seconds": "SQS_VISIBILITY_TIMEOUT_SECONDS",
        "membership_resync_seconds": "MEMBERSHIP_RESYNC_SECONDS",
        "membership_relist_seconds": "MEMBERSHIP_RELIST_SECONDS",
        "membership_ttl_seconds": "MEMBERSHIP_TTL_SECONDS",
        "stale_running_seconds": "STALE_RUNNING_SECONDS",
        "eviction_backoff_seconds": "EVICTION_BACKOFF_SECONDS",
        "eviction_backoff_max_seconds": "EVICTION_BACKOFF_MAX_SECONDS",
        "drain_grace_margin_seconds": "DRAIN_GRACE_MARGIN_SECONDS",
        "drain_pdb_deadline_policy": "DRAIN_PDB_DEADLINE_POLICY",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "shutdown_grace_seconds": "AGENT_SHUTDOWN_GRACE_SECONDS",
        "max_command_seconds": "MAX_COMMAND_SECONDS",
        "max_control_plane_drains": "MAX_CONTROL_PLANE_DRAINS",
        "command_retry_seconds": "COMMAND_RETRY_SECONDS",
        "command_handback_max_seconds": "COMMAND_HANDBACK_MAX_SECONDS",
        # operation (issue 5): leader election, health/metrics endpoint, logs, CloudWatch, lifecycle hooks
        "leader_election": "LEADER_ELECTION",
        "leader_election_namespace": "LEADER_ELECTION_NAMESPACE",
        "leader_election_lease_name": "LEADER_ELECTION_LEASE_NAME",
        "lease_duration_seconds": "LEADER_ELECTION_LEASE_SECONDS",
        "renew_deadline_seconds": "LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
        "retry_period_seconds": "LEADER_ELECTION_RETRY_SECONDS",
        "http_port": "AGENT_HTTP_PORT",
        "readiness_max_age_seconds": "READINESS_MAX_AGE_SECONDS",
        "liveness_max_age_seconds": "LIVENESS_MAX_AGE_SECONDS",
        "log_format": "LOG_FORMAT",
        "cloudwatch_metrics": "AGENT_CLOUDWATCH_METRICS",
        "cloudwatch_namespace": "CLOUDWATCH_NAMESPACE",
        "lifecycle_heartbeat_seconds": "LIFECYCLE_HEARTBEAT_SECONDS",
        "cordon_check_seconds": "CORDON_CHECK_SECONDS",
        "ready_events": "READY_EVENTS",
        "ready_event_seconds": "READY_EVENT_SECONDS",
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    event_bus_name: str = "default"
    # drains evicting at once (earliest deadline first), a bound on those that can wait: a drain whose instance ends
    # at a deadline within ``drain_urgent_seconds`` starts at once, over it (agent/consumer/schedule.py). A drain
    # mostly waits for pods to go, so the bound that matters is the Kubernetes request rate below
    concurrency: int = Field(default=64, ge=1, le=512)
    # a drain whose instance goes away at its deadline (Spot interruption, termination lifecycle action, tightened
    # by a Spot warning) waits for no slot once its deadline is this near: more than a Spot warning's two minutes,
    # so every Spot drain starts at once. 0: such drains wait for a slot too
    drain_urgent_seconds: int = Field(default=300, ge=0, le=86400)
    # a drain whose instance ends (as above) and has no node yet waits this long for one to register (within its
    # deadline) before it is skipped: an instance launched seconds before its Spot warning (an early replacement
    # warned in the same wave) registers a minute later and takes pods. 0: skipped at once
    node_registration_wait_seconds: int = Field(default=120, ge=0, le=3600)
    # commands received and not finished (cordoned, waiting for a drain slot, draining); queued ones keep their SQS
    # message invisible through the heartbeat. Every received drain/cordon is cordoned at once, whatever this is
    max_in_flight: int = Field(default=256, ge=1, le=2048)
    # client-side Kubernetes request rate (token bucket, agent/kube/ratelimit.py; client-go's QPS/Burst): cordons
    # and Lease renewals go first. kubectl uses 50/300 since 1.27; a drain agent sends far fewer requests
    kube_qps: float = Field(default=50.0, gt=0, le=10000)
    kube_burst: int = Field(default=100, ge=1, le=10000)
    poll_wait_seconds: int = Field(default=10, ge=0, le=20)
    visibility_timeout_seconds: int = Field(default=30, ge=5, le=43200)
    # the MEMBERSHIP mark's period (each confirms the watch's view, writes the items due for their refresh)
    membership_resync_seconds: int = Field(default=60, ge=1)
    # a full (paged) list of the nodes, beside the watch: a safety net; at 1,000 nodes each list is about a megabyte
    # the apiserver serialises (agent/membership_loop.py). At least MEMBERSHIP_RESYNC_SECONDS (when unset and the
    # resync is longer, a list every resync)
    membership_relist_seconds: int = Field(default=600, ge=1, le=86400)
    # only clean-up of a cluster whose agent is gone (readers judge freshness by reported_at and the MEMBERSHIP
    # mark); each item is written again before it lapses, so a longer TTL means fewer writes (agent/membership.py)
    membership_ttl_seconds: int = Field(default=86400, ge=10)
    stale_running_seconds: int = Field(default=60, ge=5)
    eviction_backoff_seconds: float = Field(default=0.5, gt=0)
    eviction_backoff_max_seconds: float = Field(default=5.0, gt=0)
    # a pod's grace period is capped so its shutdown ends this long before the command's deadline (agent/drain/policy)
    drain_grace_margin_seconds: float = Field(default=10.0, ge=0, le=600)
    drain_pdb_deadline_policy: PdbDeadlinePolicy = PdbDeadlinePolicy.DELETE
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # a command runs at most this long from its start whatever deadline it carries (a far-future deadline, forged or
    # mistaken, must not hold a worker slot behind a PodDisruptionBudget for ever)
    max_command_seconds: int = Field(default=3600, ge=60, le=86400)
    # control-plane nodes drained at once in the whole cluster (slots in the table, agent/controlplane.py); one more
    # waits for a slot within its deadline, its node untouched: masters are replaced one at a time; 0 refuses every
    # control-plane drain
    max_control_plane_drains: int = Field(default=1, ge=0, le=10)
    # a retryable Kubernetes, DynamoDB or SQS error met while working a command is retried in the agent with backoff
    # this long (never past the command's deadline) before the command is handed back to the queue
    command_retry_seconds: float = Field(default=60.0, ge=0, le=900)
    # a handed-back command's message is invisible 5 s doubled per receive (ApproximateReceiveCount), at most this
    # long: the queue's maxReceiveCount receives are spread over minutes, so a burst of errors does not dead-letter it
    command_handback_max_seconds: int = Field(default=900, ge=1, le=43200)
    # on SIGTERM, how long in-flight commands may run on before they are handed back to another agent; keep it
    # below the pod's terminationGracePeriodSeconds minus SQS_WAIT_SECONDS
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    # Leader election on a coordination.k8s.io/v1 Lease (agent/leader.py). With the defaults a standby takes over
    # at most lease + 2 x retry = 14 s after the leader's last renewal.
    leader_election: bool = True
    leader_election_namespace: str = Field(default="node-manager", min_length=1)
    leader_election_lease_name: str = Field(default="node-manager-agent", min_length=1)
    lease_duration_seconds: float = Field(default=10.0, ge=2)
    renew_deadline_seconds: float = Field(default=7.0, ge=1)
    retry_period_seconds: float = Field(default=2.0, gt=0)
    # /healthz, /readyz and /metrics (agent/health.py); 0 picks a free port (tests)
    http_port: int = Field(default=8080, ge=0, le=65535)
    readiness_max_age_seconds: float = Field(default=60.0, gt=0)
    liveness_max_age_seconds: float = Field(default=90.0, gt=0)
    log_format: LogFormat = LogFormat.JSON
    # CloudWatch metrics the alarms watch (agent/cloudwatch.py): membership heartbeat, drain failures
    cloudwatch_metrics: bool = True
    cloudwatch_namespace: str = Field(default="NodeManager", min_length=1)
    # RecordLifecycleActionHeartbeat period while a drain of an instance with a pending hook runs (agent/hooks.py);
    # keep it below the hook's HeartbeatTimeout (the stack's lifecycle_hook_heartbeat_seconds, default 300)
    lifecycle_heartbeat_seconds: float = Field(default=60.0, ge=5)
    # How often the leader looks for cordons due to be given back (commands with options.uncordon_after_seconds,
    # e.g. rebalance cordons after REBALANCE_QUIET_SECONDS; agent/cordons/): the release is this much late at most.
    cordon_check_seconds: float = Field(default=60.0, ge=1)
    # "Node Ready" events (agent/ready.py): the leader reports nodes that became Ready, at most one PutEvents call
    # every READY_EVENT_SECONDS (batched), so a refresh run waiting for a node advances without polling for it
    ready_events: bool = True
    ready_event_seconds: float = Field(default=1.0, ge=0.1, le=60)

    @model_validator(mode="after")
    def _consistent(self) -> AgentSettings:
        if not self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError(
                "leader election needs LEADER_ELECTION_RETRY_SECONDS < "
                "LEADER_ELECTION_RENEW_DEADLINE_SECONDS < LEADER_ELECTION_LEASE_SECONDS"
            )
        if self.liveness_max_age_seconds <= self.poll_wait_seconds + 30:
            raise ValueError(
                "LIVENESS_MAX_AGE_SECONDS must exceed SQS_WAIT_SECONDS + 30 (the poll loop's longest "
                "wait plus its longest backoff)"
            )
        if self.eviction_backoff_max_seconds < self.eviction_backoff_seconds:
            raise ValueError("EVICTION_BACKOFF_MAX_SECONDS must be >= EVICTION_BACKOFF_SECONDS")
        if self.stale_running_seconds < self.visibility_timeout_seconds:
            raise ValueError("STALE_RUNNING_SECONDS must be >= SQS_VISIBILITY_TIMEOUT_SECONDS")
        if self.max_in_flight < self.concurrency:
            raise ValueError("AGENT_MAX_IN_FLIGHT must be >= AGENT_CONCURRENCY")
        if self.membership_ttl_seconds <= self.membership_resync_seconds:
            raise ValueError("MEMBERSHIP_TTL_SECONDS must exceed MEMBERSHIP_RESYNC_SECONDS")
        relist_set = "membership_relist_seconds" in self.model_fields_set  # unset: the reporter lists at least
        if relist_set and self.membership_relist_seconds < self.membership_resync_seconds:  # every resync
            raise ValueError("MEMBERSHIP_RELIST_SECONDS must be >= MEMBERSHIP_RESYNC_SECONDS")
        return self
