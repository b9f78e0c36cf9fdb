"""Typed settings, read from environment variables when a handler or the agent starts (never at import).

Each deployable has one frozen settings object, validated across fields. Every variable is documented in the
README ("Settings"). A missing or invalid value raises ``SettingsError`` naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.exceptions import SettingsError


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


class InterruptionSettings(_Settings):
    """Settings of the interruption Lambda."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        "idempotency_table_name": "IDEMPOTENCY_TABLE_NAME",
        "spot_deadline_seconds": "SPOT_DEADLINE_SECONDS",
        "early_replacement": "EARLY_REPLACEMENT",
        "rebalance_policy": "REBALANCE_POLICY",
        "rebalance_drain_timeout_seconds": "REBALANCE_DRAIN_TIMEOUT_SECONDS",
        "membership_max_age_seconds": "MEMBERSHIP_MAX_AGE_SECONDS",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "dry_run": "DRY_RUN",
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    idempotency_table_name: str | None = None
    spot_deadline_seconds: int = Field(default=120, ge=10, le=3600)
    early_replacement: bool = True
    rebalance_policy: RebalancePolicy = RebalancePolicy.CORDON
    rebalance_drain_timeout_seconds: int = Field(default=600, ge=10, le=86400)
    membership_max_age_seconds: int = Field(default=600, ge=10)
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # Plan and log only: no table writes, no SQS message, no DetachInstances.
    dry_run: bool = False


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
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "shutdown_grace_seconds": "AGENT_SHUTDOWN_GRACE_SECONDS",
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
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # on SIGTERM, how long in-flight commands may run on before they are handed back to another agent; keep it
    # below the pod's terminationGracePeriodSeconds minus SQS_WAIT_SECONDS
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> AgentSettings:
        if self.eviction_backoff_max_seconds < self.eviction_backoff_seconds:
            raise ValueError("EVICTION_BACKOFF_MAX_SECONDS must be >= EVICTION_BACKOFF_SECONDS")
        if self.stale_running_seconds < self.visibility_timeout_seconds:
            raise ValueError("STALE_RUNNING_SECONDS must be >= SQS_VISIBILITY_TIMEOUT_SECONDS")
        if self.membership_ttl_seconds <= self.membership_resync_seconds:
            raise ValueError("MEMBERSHIP_TTL_SECONDS must exceed MEMBERSHIP_RESYNC_SECONDS")
        return self
