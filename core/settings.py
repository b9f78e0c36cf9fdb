"""Typed settings, read from environment variables when a handler or the agent starts (never at import).

Each deployable has one frozen settings object, validated across fields. Every variable is documented in the
README ("Settings"). A missing or invalid value raises ``SettingsError`` naming the variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.exceptions import SettingsError
from core.runs import DrainTimeoutPolicy


class LogFormat(str, Enum):
    """``LOG_FORMAT`` of the agent (``agent.logs``): one JSON object per line, or human-readable text."""

    JSON = "json"
    TEXT = "text"


class RebalancePolicy(str, Enum):
    """What to do on an "EC2 Instance Rebalance Recommendation" (a Spot instance at elevated risk).

    - ``ignore``: acknowledge only.
    - ``cordon``: cordon the node so no new pods land there (what aws-node-termination-handler does when
      rebalance monitoring is enabled).
    - ``drain``: cordon and drain it now, with ``REBALANCE_DRAIN_TIMEOUT_SECONDS``.
    """

    IGNORE = "ignore"
    CORDON = "cordon"
    DRAIN = "drain"


class PdbDeadlinePolicy(str, Enum):
    """``DRAIN_PDB_DEADLINE_POLICY``: what a deadline-bound drain (Spot warning, termination lifecycle hook: the
    instance goes at the deadline whatever the drain did) does with a pod a PodDisruptionBudget still protects.

    - ``honor``: keep retrying the eviction until the deadline; the reclaim then kills the pod without a shutdown.
    - ``delete``: once the pod's grace period no longer fits before the deadline (minus
      ``DRAIN_GRACE_MARGIN_SECONDS``), DELETE it with the grace that remains, so it gets SIGTERM and stops
      cleanly (Karpenter's ``terminationGracePeriod`` does the same).
    """

    HONOR = "honor"
    DELETE = "delete"


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # name of the field -> environment variable
    ENV_VARS: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Any:
        """Build the settings from ``environ`` (default ``os.environ``).

        Raises:
            SettingsError: a required variable is missing or a value does not validate.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, var in cls.ENV_VARS.items():
            raw = env.get(var)
            if raw is not None and raw != "":
                values[field] = raw
        try:
            return cls(**values)
        except ValidationError as err:
            first = err.errors()[0]
            loc = first["loc"][0] if first["loc"] else ""
            var = cls.ENV_VARS.get(str(loc), str(loc)) if loc else "settings"
            raise SettingsError(var, first["msg"]) from err


_COMMON_ENV = {
    "cluster_name": "CLUSTER_NAME",
    "table_name": "TABLE_NAME",
    "queue_url": "QUEUE_URL",
}

# The Lambdas' own: the account they run in, for running outside Lambda (in Lambda the invocation context's function
# ARN names it and wins). Without either, no event from the bus is acted on (``lambdas.events.scope``).
_LAMBDA_ENV = {"account_id": "ACCOUNT_ID"}
ACCOUNT_ID_PATTERN = r"^\d{12}$"


class InterruptionSettings(_Settings):
    """Settings of the interruption Lambda."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        **_LAMBDA_ENV,
        "idempotency_table_name": "IDEMPOTENCY_TABLE_NAME",
        "spot_deadline_seconds": "SPOT_DEADLINE_SECONDS",
        "early_replacement": "EARLY_REPLACEMENT",
        "rebalance_policy": "REBALANCE_POLICY",
        "rebalance_drain_timeout_seconds": "REBALANCE_DRAIN_TIMEOUT_SECONDS",
        "membership_max_age_seconds": "MEMBERSHIP_MAX_AGE_SECONDS",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "dry_run": "DRY_RUN",
        # lifecycle hooks (issue 5)
        "lifecycle_hook_name": "LIFECYCLE_HOOK_NAME",
        "lifecycle_drain_timeout_seconds": "LIFECYCLE_DRAIN_TIMEOUT_SECONDS",
        "lifecycle_recent_drain_seconds": "LIFECYCLE_RECENT_DRAIN_SECONDS",
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    account_id: str | None = Field(default=None, pattern=ACCOUNT_ID_PATTERN)
    idempotency_table_name: str | None = None
    spot_deadline_seconds: int = Field(default=120, ge=10, le=3600)
    early_replacement: bool = True
    rebalance_policy: RebalancePolicy = RebalancePolicy.CORDON
    rebalance_drain_timeout_seconds: int = Field(default=600, ge=10, le=86400)
    membership_max_age_seconds: int = Field(default=600, ge=10)
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # Plan and log only: no table writes, no SQS message, no DetachInstances.
    dry_run: bool = False
    # Termination lifecycle hooks: only actions of this hook are ours (another tool's hook is left alone); the
    # drain's deadline counts from the event; a drain of the instance that succeeded this recently makes a hook
    # complete at once (no second drain).
    lifecycle_hook_name: str = Field(default="node-manager-drain", min_length=1, max_length=255)
    lifecycle_drain_timeout_seconds: int = Field(default=900, ge=30, le=172800)
    lifecycle_recent_drain_seconds: int = Field(default=3600, ge=0)


class AgentSettings(_Settings):
    """Settings of the in-cluster agent."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        "event_bus_name": "EVENT_BUS_NAME",
        "concurrency": "AGENT_CONCURRENCY",
        "poll_wait_seconds": "SQS_WAIT_SECONDS",
        "visibility_timeout_seconds": "SQS_VISIBILITY_TIMEOUT_SECONDS",
        "membership_resync_seconds": "MEMBERSHIP_RESYNC_SECONDS",
        "membership_ttl_seconds": "MEMBERSHIP_TTL_SECONDS",
        "stale_running_seconds": "STALE_RUNNING_SECONDS",
        "eviction_backoff_seconds": "EVICTION_BACKOFF_SECONDS",
        "eviction_backoff_max_seconds": "EVICTION_BACKOFF_MAX_SECONDS",
        "drain_grace_margin_seconds": "DRAIN_GRACE_MARGIN_SECONDS",
        "drain_pdb_deadline_policy": "DRAIN_PDB_DEADLINE_POLICY",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "shutdown_grace_seconds": "AGENT_SHUTDOWN_GRACE_SECONDS",
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
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    event_bus_name: str = "default"
    concurrency: int = Field(default=4, ge=1, le=64)
    poll_wait_seconds: int = Field(default=10, ge=0, le=20)
    visibility_timeout_seconds: int = Field(default=30, ge=5, le=43200)
    membership_resync_seconds: int = Field(default=60, ge=1)
    membership_ttl_seconds: int = Field(default=600, ge=10)
    stale_running_seconds: int = Field(default=60, ge=5)
    eviction_backoff_seconds: float = Field(default=0.5, gt=0)
    eviction_backoff_max_seconds: float = Field(default=5.0, gt=0)
    # a pod's grace period is capped so its shutdown ends this long before the command's deadline (agent/drain/policy)
    drain_grace_margin_seconds: float = Field(default=10.0, ge=0, le=600)
    drain_pdb_deadline_policy: PdbDeadlinePolicy = PdbDeadlinePolicy.DELETE
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
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
    # CloudWatch metrics the alarms watch (agent/cloudwatch.py): membership heartbeat, drain failures, lock age
    cloudwatch_metrics: bool = True
    cloudwatch_namespace: str = Field(default="NodeManager", min_length=1)
    # RecordLifecycleActionHeartbeat period while a drain of an instance with a pending hook runs (agent/hooks.py);
    # keep it below the hook's HeartbeatTimeout (the stack's lifecycle_hook_heartbeat_seconds, default 300)
    lifecycle_heartbeat_seconds: float = Field(default=60.0, ge=5)

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
        if self.membership_ttl_seconds <= self.membership_resync_seconds:
            raise ValueError("MEMBERSHIP_TTL_SECONDS must exceed MEMBERSHIP_RESYNC_SECONDS")
        return self


_DURATION_RE = re.compile(
    r"^(?:(?P<w>\d+)w)?(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?\Z", re.ASCII
)
_DURATION_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str | int) -> int:
    """Seconds in a duration such as ``7d``, ``168h``, ``1d12h``, ``90m``, ``3600s`` or a bare number of seconds.

    >>> parse_duration("7d"), parse_duration("168h"), parse_duration("1w"), parse_duration(90)
    (604800, 604800, 604800, 90)

    Raises:
        ValueError: not such a duration, or zero.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        seconds = text
    else:
        raw = str(text).strip().lower()
        if raw.isascii() and raw.isdigit():
            seconds = int(raw)
        else:
            match = _DURATION_RE.fullmatch(raw)
            if not raw or match is None:
                raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 168h, 1d12h, 90m)")
            seconds = sum(int(v) * _DURATION_UNITS[k] for k, v in match.groupdict().items() if v)
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return seconds


class RefresherSettings(_Settings):
    """Settings of the refresher Lambda (the defaults of a run; a manual request may override the run's own)."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        **_LAMBDA_ENV,
        "max_age": "REFRESH_MAX_AGE",
        "max_surge": "REFRESH_MAX_SURGE",
        "drain_timeout_seconds": "REFRESH_DRAIN_TIMEOUT_SECONDS",
        "drain_timeout_policy": "REFRESH_DRAIN_TIMEOUT_POLICY",
        "lock_lease_seconds": "REFRESH_LOCK_LEASE_SECONDS",
        "effect_grace_seconds": "REFRESH_EFFECT_GRACE_SECONDS",
        "master_settle_seconds": "REFRESH_MASTER_SETTLE_SECONDS",
        "wait_budget_seconds": "REFRESH_WAIT_BUDGET_SECONDS",
        "poll_seconds": "REFRESH_POLL_SECONDS",
        "agent_grace_seconds": "REFRESH_AGENT_GRACE_SECONDS",
        "membership_max_age_seconds": "MEMBERSHIP_MAX_AGE_SECONDS",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    account_id: str | None = Field(default=None, pattern=ACCOUNT_ID_PATTERN)
    # weekly runs replace instances launched longer ago than this (or on an outdated launch template version)
    max_age: str = "7d"
    max_surge: int = Field(default=1, ge=1, le=100)
    drain_timeout_seconds: int = Field(default=600, ge=10, le=86400)
    drain_timeout_policy: DrainTimeoutPolicy = DrainTimeoutPolicy.PAUSE
    # the cluster lock's lease; renewed by every invocation, so it must exceed the tick period
    lock_lease_seconds: int = Field(default=1800, ge=60)
    # an intent recorded this long ago whose effect is not visible is redone (a crashed invocation)
    effect_grace_seconds: float = Field(default=30.0, ge=0)
    # masters must be all Ready on two checks this far apart before the next master
    master_settle_seconds: float = Field(default=10.0, ge=0)
    # how long one invocation may poll for a node to become Ready before returning (the tick takes over)
    wait_budget_seconds: float = Field(default=60.0, ge=0, le=840)
    poll_seconds: float = Field(default=1.0, gt=0)
    # a drain command still unfinished this long after its deadline counts as timed out (agent gone)
    agent_grace_seconds: int = Field(default=120, ge=0)
    membership_max_age_seconds: int = Field(default=600, ge=10)
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)

    @model_validator(mode="after")
    def _consistent(self) -> RefresherSettings:
        parse_duration(self.max_age)  # ValueError names the value
        return self

    @property
    def max_age_seconds(self) -> int:
        return parse_duration(self.max_age)


class ReplenisherSettings(_Settings):
    """Settings of the replenisher Lambda (every duration in seconds)."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        **_LAMBDA_ENV,
        "recovery_hold_seconds": "RECOVERY_HOLD_SECONDS",
        "backoff_initial_seconds": "BACKOFF_INITIAL_SECONDS",
        "backoff_max_seconds": "BACKOFF_MAX_SECONDS",
        "backoff_reset_seconds": "BACKOFF_RESET_SECONDS",
        "donor_max_size_factor": "DONOR_MAX_SIZE_FACTOR",
        "max_provision_seconds": "MAX_PROVISION_SECONDS",
        "giveback_drain_timeout_seconds": "GIVEBACK_DRAIN_TIMEOUT_SECONDS",
        "cleanup_limit": "CLEANUP_LIMIT",
        "lock_lease_seconds": "LOCK_LEASE_SECONDS",
        "membership_max_age_seconds": "MEMBERSHIP_MAX_AGE_SECONDS",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "dry_run": "DRY_RUN",
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    account_id: str | None = Field(default=None, pattern=ACCOUNT_ID_PATTERN)
    # a recovered ASG must hold its desired count of Ready nodes this long before the capacity is given back
    recovery_hold_seconds: int = Field(default=600, ge=0)
    # an ASG whose launch failed is not trusted (as donor, or as recovered) until its backoff passes: it starts at
    # BACKOFF_INITIAL_SECONDS, doubles each time the ASG fails again after a window ended, is capped at
    # BACKOFF_MAX_SECONDS, and starts over after BACKOFF_RESET_SECONDS without a failure
    backoff_initial_seconds: int = Field(default=300, ge=0)
    backoff_max_seconds: int = Field(default=1800, ge=0)
    backoff_reset_seconds: int = Field(default=3 * 3600, ge=0)
    # a donor's MaxSize may be raised up to floor(original MaxSize * factor), never further
    donor_max_size_factor: float = Field(default=2.0, ge=1.0, le=10.0)
    # an instance InService this long without a registered node is terminated (the ASG replaces it)
    max_provision_seconds: int = Field(default=900, ge=60)
    # drain deadline of an instance given back
    giveback_drain_timeout_seconds: int = Field(default=600, ge=10)
    # at most this many surplus / unregistered instances terminated per invocation
    cleanup_limit: int = Field(default=2, ge=0, le=50)
    lock_lease_seconds: int = Field(default=120, ge=10)
    membership_max_age_seconds: int = Field(default=600, ge=10)
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # Plan and log only: no table writes, no SQS message, no Auto Scaling change.
    dry_run: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> ReplenisherSettings:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("BACKOFF_MAX_SECONDS must be >= BACKOFF_INITIAL_SECONDS")
        return self
