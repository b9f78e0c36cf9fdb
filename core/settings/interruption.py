"""Settings of the interruption Lambda."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from core.settings.base import _COMMON_ENV, _LAMBDA_ENV, ACCOUNT_ID_PATTERN, RebalancePolicy, _Settings


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
        "rebalance_quiet_seconds": "REBALANCE_QUIET_SECONDS",
        "rebalance_replace_limit": "REBALANCE_REPLACE_LIMIT",
        "rebalance_max_cordoned_percent": "REBALANCE_MAX_CORDONED_PERCENT",
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
    # A rebalance cordon (or drain) is given back this long after it ended when nothing followed for the instance
    # (no Spot warning, lifecycle action or state change): the recommendation did not turn into an interruption.
    rebalance_quiet_seconds: int = Field(default=1800, ge=5, le=86400)
    # REBALANCE_POLICY=replace: how many instances of the cluster may be replaced at once for rebalance
    # recommendations (the steps of the one replacement run not yet finished; the run's max surge). 1: one at a time,
    # as a refresh's canary would.
    rebalance_replace_limit: int = Field(default=1, ge=1, le=20)
    # REBALANCE_POLICY=cordon or drain (and replace's fallback cordon, when it replaces nothing): at most this share
    # of the cluster's nodes (the agent's last membership count) cordoned for rebalance recommendations at once (at
    # least one node). AWS recommends a whole pool at once when its capacity is at risk; with no autoscaler, a third
    # of the cluster cordoned for REBALANCE_QUIET_SECONDS leaves pods nowhere to go. A recommendation beyond it is
    # acknowledged (``rebalance_capped``); a Spot warning that follows drains the node as usual. 100: no cap
    rebalance_max_cordoned_percent: int = Field(default=20, ge=1, le=100)
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
