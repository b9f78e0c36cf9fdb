"""Settings of the replenisher Lambda."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from core.exceptions import SettingsError
from core.lock import lease_too_short
from core.settings.base import _COMMON_ENV, _LAMBDA_ENV, _TIMEOUT_ENV, ACCOUNT_ID_PATTERN, _Settings


class ReplenisherSettings(_Settings):
    """Settings of the replenisher Lambda (every duration in seconds)."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        **_LAMBDA_ENV,
        **_TIMEOUT_ENV,
        "recovery_hold_seconds": "RECOVERY_HOLD_SECONDS",
        "backoff_initial_seconds": "BACKOFF_INITIAL_SECONDS",
        "backoff_max_seconds": "BACKOFF_MAX_SECONDS",
        "backoff_reset_seconds": "BACKOFF_RESET_SECONDS",
        "donor_max_size_factor": "DONOR_MAX_SIZE_FACTOR",
        "reset_hold_seconds": "RESET_HOLD_SECONDS",
        "detached_max_seconds": "DETACHED_MAX_SECONDS",
        "max_provision_seconds": "MAX_PROVISION_SECONDS",
        "giveback_drain_timeout_seconds": "GIVEBACK_DRAIN_TIMEOUT_SECONDS",
        "give_back_timeout_seconds": "REPLENISH_GIVE_BACK_TIMEOUT_SECONDS",
        "cleanup_limit": "CLEANUP_LIMIT",
        "lock_lease_seconds": "LOCK_LEASE_SECONDS",
        "lock_wait_seconds": "LOCK_WAIT_SECONDS",
        "membership_max_age_seconds": "MEMBERSHIP_MAX_AGE_SECONDS",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "command_sweep_seconds": "COMMAND_SWEEP_SECONDS",
        "dry_run": "DRY_RUN",
        "lifecycle_hooks": "LIFECYCLE_HOOKS",
        "lifecycle_hook_name": "LIFECYCLE_HOOK_NAME",
        "lifecycle_hook_heartbeat_seconds": "LIFECYCLE_HOOK_HEARTBEAT_SECONDS",
        "lifecycle_hook_recheck_seconds": "LIFECYCLE_HOOK_RECHECK_SECONDS",
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
    # a donor whose sizes were reset under a compensation (kOps, a person) is not raised again for this long: the
    # shortfall goes to other siblings instead of fighting the reset
    reset_hold_seconds: int = Field(default=1800, ge=0)
    # an instance detached for early replacement (DETACH#) still running this long after the detach was recorded is
    # terminated (the Spot reclaim comes 2 minutes after the warning; one that never came leaves it running for good)
    detached_max_seconds: int = Field(default=900, ge=180, le=86400)
    # an instance InService this long without a registered node is terminated (the ASG replaces it)
    max_provision_seconds: int = Field(default=900, ge=60)
    # drain deadline of an instance given back
    giveback_drain_timeout_seconds: int = Field(default=600, ge=10)
    # a donor's give-back asks (a lowering of a raise that never launched, a terminate with decrement, a MaxSize
    # restore) read back within this, counted from the first ask not read back; past it nothing more is asked of that
    # donor for the ledger, what is left raised is recorded (Ledger.left_raised) and the donor is closed out
    give_back_timeout_seconds: int = Field(default=900, ge=60)
    # at most this many surplus / unregistered instances terminated per invocation
    cleanup_limit: int = Field(default=2, ge=0, le=50)
    # the cluster lock's lease: at least the function timeout plus core.lock.LEASE_MARGIN_SECONDS
    lock_lease_seconds: int = Field(default=120, ge=10)
    # a plan that needs the cluster lock waits this long for another holder (a refresh run holds it for one pass of a
    # few seconds) before it leaves the work to the next invocation; well inside the function's 60 s timeout
    lock_wait_seconds: float = Field(default=20.0, ge=0, le=45)
    # the tick re-sends a CMD# still queued this long after it was (last) sent, and expires one past its deadline
    # (lambdas/common/sweep.py); 0: no sweep
    command_sweep_seconds: int = Field(default=300, ge=0)
    # the Lambda's timeout (the stack sets it); None: unknown here, checked against the invocation's context instead
    function_timeout_seconds: int | None = Field(default=None, ge=1, le=900)
    membership_max_age_seconds: int = Field(default=600, ge=10)
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # Plan and log only: no table writes, no SQS message, no Auto Scaling change.
    dry_run: bool = False
    # Every group tagged for the cluster gets the termination lifecycle hook (lambdas/replenisher/hooks.py): created
    # when missing, so groups kOps creates or re-creates are covered without a redeploy. The name must be the
    # interruption Lambda's LIFECYCLE_HOOK_NAME (its rule and decision match it); PutLifecycleHook's name grammar.
    lifecycle_hooks: bool = True
    lifecycle_hook_name: str = Field(default="node-manager-drain", pattern=r"^[A-Za-z0-9\-_/]{1,255}$")
    lifecycle_hook_heartbeat_seconds: int = Field(default=300, ge=30, le=7200)  # Auto Scaling's HeartbeatTimeout bounds
    # a group whose hook was seen (same name and CreatedTime) is asked again after this long (a hook deleted by hand)
    lifecycle_hook_recheck_seconds: int = Field(default=3600, ge=60)

    @model_validator(mode="after")
    def _consistent(self) -> ReplenisherSettings:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("BACKOFF_MAX_SECONDS must be >= BACKOFF_INITIAL_SECONDS")
        problem = lease_too_short(self.lock_lease_seconds, self.function_timeout_seconds)
        if problem:  # named after the variable (a ValueError here would name only "settings")
            raise SettingsError("LOCK_LEASE_SECONDS", problem)
        return self
