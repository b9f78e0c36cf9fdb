"""Settings of the refresher Lambda."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from core.exceptions import SettingsError
from core.lock import lease_too_short
from core.runlimits import MIN_RUN_RETENTION_SECONDS, RUN_RETENTION_SECONDS
from core.runs import DrainTimeoutPolicy, WaitDeadline
from core.settings.base import (
    _COMMON_ENV,
    _LAMBDA_ENV,
    _TIMEOUT_ENV,
    ACCOUNT_ID_PATTERN,
    _Settings,
    check_max_age,
    parse_duration,
)


class RefresherSettings(_Settings):
    """Settings of the refresher Lambda (the defaults of a run; a manual request may override the run's own)."""

    ENV_VARS: ClassVar[dict[str, str]] = {
        **_COMMON_ENV,
        **_LAMBDA_ENV,
        **_TIMEOUT_ENV,
        "max_age": "REFRESH_MAX_AGE",
        "max_surge": "REFRESH_MAX_SURGE",
        "request_max_surge": "REFRESH_REQUEST_MAX_SURGE",
        "request_min_drain_timeout_seconds": "REFRESH_REQUEST_MIN_DRAIN_TIMEOUT_SECONDS",
        "request_allow_terminate": "REFRESH_REQUEST_ALLOW_TERMINATE",
        "drain_timeout_seconds": "REFRESH_DRAIN_TIMEOUT_SECONDS",
        "drain_timeout_policy": "REFRESH_DRAIN_TIMEOUT_POLICY",
        "lock_lease_seconds": "REFRESH_LOCK_LEASE_SECONDS",
        "effect_grace_seconds": "REFRESH_EFFECT_GRACE_SECONDS",
        "master_settle_seconds": "REFRESH_MASTER_SETTLE_SECONDS",
        "wait_budget_seconds": "REFRESH_WAIT_BUDGET_SECONDS",
        "poll_seconds": "REFRESH_POLL_SECONDS",
        "event_wait_poll_seconds": "REFRESH_EVENT_WAIT_POLL_SECONDS",
        "agent_grace_seconds": "REFRESH_AGENT_GRACE_SECONDS",
        "spare_launch_timeout_seconds": "REFRESH_SPARE_LAUNCH_TIMEOUT_SECONDS",
        "spare_register_timeout_seconds": "REFRESH_SPARE_REGISTER_TIMEOUT_SECONDS",
        "spare_ready_timeout_seconds": "REFRESH_SPARE_READY_TIMEOUT_SECONDS",
        "master_ready_timeout_seconds": "REFRESH_MASTER_READY_TIMEOUT_SECONDS",
        "nodes_ready_timeout_seconds": "REFRESH_NODES_READY_TIMEOUT_SECONDS",
        "group_quiet_timeout_seconds": "REFRESH_GROUP_QUIET_TIMEOUT_SECONDS",
        "termination_timeout_seconds": "REFRESH_TERMINATION_TIMEOUT_SECONDS",
        "give_back_timeout_seconds": "REFRESH_GIVE_BACK_TIMEOUT_SECONDS",
        "membership_max_age_seconds": "MEMBERSHIP_MAX_AGE_SECONDS",
        "command_ttl_seconds": "COMMAND_TTL_SECONDS",
        "run_retention_seconds": "RUN_RETENTION_SECONDS",
    }

    cluster_name: str = Field(min_length=1)
    table_name: str = Field(min_length=1)
    queue_url: str = Field(min_length=1)
    account_id: str | None = Field(default=None, pattern=ACCOUNT_ID_PATTERN)
    # weekly runs replace instances launched longer ago than this (or on an outdated launch template version)
    max_age: str = "7d"
    max_surge: int = Field(default=1, ge=1, le=100)
    # the largest max_surge a manual request may ask for (a larger one is refused); with max_surge, the most any run
    # may surge a group by: its sizes are clamped to original MaxSize + the larger of the two
    request_max_surge: int = Field(default=3, ge=1, le=100)
    # the shortest drain timeout a manual request may ask for (a shorter one is refused): pods get at least this long
    # to leave an old node (the settings' own REFRESH_DRAIN_TIMEOUT_SECONDS is always allowed)
    request_min_drain_timeout_seconds: int = Field(default=120, ge=10, le=86400)
    # whether a manual request may ask for drain_timeout_policy "terminate" (an old node terminated with pods left on
    # it once its drain timed out); asking for the settings' own policy is always allowed
    request_allow_terminate: bool = False
    drain_timeout_seconds: int = Field(default=600, ge=10, le=86400)
    drain_timeout_policy: DrainTimeoutPolicy = DrainTimeoutPolicy.PAUSE
    # the cluster lock's lease: held for one decision pass of one invocation and released before the invocation
    # waits or returns; at least the Lambda's timeout (120 s) plus core.lock.LEASE_MARGIN_SECONDS, so a pass never
    # outlives its lease, and short, so a crashed invocation keeps compensation out for at most this long
    lock_lease_seconds: int = Field(default=180, ge=60)
    # the Lambda's timeout (the stack sets it); None: unknown here, checked against the invocation's context instead
    function_timeout_seconds: int | None = Field(default=None, ge=1, le=900)
    # an intent recorded this long ago whose effect is not visible is redone (a crashed invocation)
    effect_grace_seconds: float = Field(default=30.0, ge=0)
    # masters must be all Ready on two checks this far apart before the next master
    master_settle_seconds: float = Field(default=10.0, ge=0)
    # how long one invocation may poll for a node to become Ready before returning (the tick takes over)
    wait_budget_seconds: float = Field(default=60.0, ge=0, le=840)
    poll_seconds: float = Field(default=1.0, gt=0)
    # a wait that an event ends (the spare's launch: "EC2 Instance Launch Successful"; a node Ready: the agent's
    # "Node Ready") is polled this often instead: only a safety net for a lost event (the tick is the other one)
    event_wait_poll_seconds: float = Field(default=20.0, gt=0)
    # a drain command still unfinished this long after its deadline counts as timed out (agent gone)
    agent_grace_seconds: int = Field(default=120, ge=0)
    # deadlines of a run's waits (core.runs.WaitDeadline): past one, the run pauses and gives its surge back.
    # A spare must launch within 10 min of the surge (Cluster Autoscaler's max node provision time is 15 min),
    # register within 15 min of launching (kOps nodeup on a fresh instance), be Ready within 10 min of registering;
    # the masters must all be Ready within 15 min of a master's replacement (kops rolling-update's validation
    # timeout); the nodes a step needs Ready besides its own (a NotReady node due later) within 15 min; a group
    # carrying compensation must be given back within 2 h before the run surges it.
    spare_launch_timeout_seconds: int = Field(default=600, ge=1)
    spare_register_timeout_seconds: int = Field(default=900, ge=1)
    spare_ready_timeout_seconds: int = Field(default=600, ge=1)
    master_ready_timeout_seconds: int = Field(default=900, ge=1)
    nodes_ready_timeout_seconds: int = Field(default=900, ge=1)
    group_quiet_timeout_seconds: int = Field(default=7200, ge=1)
    # a drained old instance still in service this long after its termination was asked (Auto Scaling refusing it
    # for a reason the run does not know): kept, uncordoned, its surge given back, the run paused
    termination_timeout_seconds: int = Field(default=600, ge=1)
    # a surge given back: Auto Scaling launches the instance a step gives back, a lowering of desired capacity or a
    # MaxSize restore reads back (refused for good: AccessDenied, a validation error after kOps changed MinSize; no
    # capacity in the AZ) within this; else it is left raised, recorded, and the run ends failed, the lock released
    give_back_timeout_seconds: int = Field(default=900, ge=1)
    membership_max_age_seconds: int = Field(default=600, ge=10)
    command_ttl_seconds: int = Field(default=7 * 86400, ge=3600)
    # a run that is over keeps its RUN# item this long after its end (its expires_at, the table's TTL attribute); at
    # least a day, so an operator reads a finished run's status and the replenisher sees its end
    run_retention_seconds: int = Field(default=RUN_RETENTION_SECONDS, ge=MIN_RUN_RETENTION_SECONDS)

    @model_validator(mode="after")
    def _consistent(self) -> RefresherSettings:
        check_max_age(self.max_age)  # ValueError names the value (at most a century: stored in RUN#)
        problem = lease_too_short(self.lock_lease_seconds, self.function_timeout_seconds)
        if problem:  # named after the variable (a ValueError here would name only "settings")
            raise SettingsError("REFRESH_LOCK_LEASE_SECONDS", problem)
        return self

    @property
    def surge_limit(self) -> int:
        """The most surge any run may use (``core.capacity.surge_bounds``): a group's MaxSize and desired capacity
        are clamped to its original MaxSize plus this, whatever the ``RUN#`` item says."""
        return max(self.max_surge, self.request_max_surge)

    @property
    def max_age_seconds(self) -> int:
        return parse_duration(self.max_age)

    def deadline_seconds(self, wait: WaitDeadline) -> int:
        """Seconds a run may spend in ``wait`` before it pauses."""
        return int(getattr(self, f"{wait.value}_timeout_seconds"))

    @property
    def deadlines(self) -> dict[str, int]:
        """Every wait's deadline in seconds, by ``WaitDeadline`` value (the plan shows them)."""
        return {w.value: self.deadline_seconds(w) for w in WaitDeadline}
