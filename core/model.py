"""The contracts shared by the Lambdas and the agent: commands, their statuses, membership records.

A command travels as JSON in an SQS message body (``Command.model_dump_json()``) and is recorded as a
``CMD#<command_id>`` item; see DESIGN.md, "Contracts".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from core.clock import aware_time, wall_now

INSTANCE_ID_RE = re.compile(r"^i-[0-9a-f]{8,17}$")
# The id prefix of the only commands that may carry a quiet period (``DrainOptions.uncordon_after_seconds``): a
# rebalance recommendation's (``lambdas.interruption.decide.common.command_id_for``). The agent's cordon check reads
# this range of ``CMD#`` items, not a week of every command, to find the cordons it may give back (``Command``
# refuses a quiet period under any other id).
QUIET_CORDON_PREFIX = "rebalance-"
# spec.providerID of a node on AWS: aws:///<availability-zone>/<instance-id>
# (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/#NodeSpec,
#  format set by the AWS cloud provider).
PROVIDER_ID_RE = re.compile(r"^aws:///(?P<az>[a-z0-9-]*)/(?P<instance_id>i-[0-9a-f]{8,17})$")


class CommandKind(str, Enum):
    CORDON = "cordon"
    DRAIN = "drain"
    UNCORDON = "uncordon"


class CommandStatus(str, Enum):
    """Status of a ``CMD#`` item. ``queued`` → ``running`` → one terminal status."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    TIMED_OUT = "timed_out"
    FAILED = "failed"
    SKIPPED = "skipped"  # nothing to do: the instance has no node (it never joined, or is already gone)

    @property
    def terminal(self) -> bool:
        return self not in (CommandStatus.QUEUED, CommandStatus.RUNNING)


# the result message of a drain the agent ended ``timed_out`` without running it: its deadline passed before it
# started (received late, or waiting for a drain slot; ``agent.consumer.steps``). Nothing was evicted: a drain the
# replenisher or the refresher's undo sent counts as never run then (``drain_never_ran``)
DEADLINE_PASSED_BEFORE_START = "deadline passed before start"


def drain_never_ran(item: Mapping[str, Any] | None, now: datetime) -> bool:
    """Whether the drain of the ``CMD#`` item ``item`` ended, or can only end, without having run before its
    deadline: no drain ran, so its deadline passing excuses no terminate (invariant 3). Pure.

    ``item`` is the item as read, plain values (None: not recorded, or not readable; the caller decides what that
    means): ``status`` a ``CommandStatus`` value, ``command.deadline`` the recorded ``Command.deadline`` (ISO 8601 with
    a zone), ``started_at`` when the agent took it up (absent until then), ``result.message`` the agent's or the
    sweeper's word on how it ended. The sending Lambda records ``command`` and ``status`` ``queued``; the agent writes
    ``started_at``, its end and ``result`` (``agent.consumer.steps``, ``agent.consumer.worker``:
    ``DEADLINE_PASSED_BEFORE_START``); the command sweeper (``lambdas.common.sweep``, the replenisher's tick) ends an
    item still ``queued`` past its deadline ``timed_out`` with no ``started_at``.

    True when it is:

    - ended ``timed_out`` with a message starting ``DEADLINE_PASSED_BEFORE_START``: taken up, then its deadline
      passed before it started (a drain slot); the agent evicted nothing (whatever ``started_at`` says);
    - ended ``timed_out`` never started (no ``started_at``: the sweeper expired it ``queued``), or started only at
      or after its deadline;
    - still ``queued`` past its deadline at ``now``: its message never sent or never received (SQS refusing every
      send, each invocation ending between the record and the send); it can only end unstarted;
    - ``running`` (or ``queued`` again) since a ``started_at`` at or after its deadline: the agent ends such a drain
      at once, unstarted, or stopped before it did (then no one ends it: the sweeper retakes no drain past its
      deadline); or past its deadline without any ``started_at`` under a status other than an end the agent reports
      (``running``, or one no writer of ours writes).

    An item whose deadline is unreadable is True only by the agent's message or with no ``started_at`` (the first
    two cases): the agent writes ``started_at`` as it takes a drain up, so a ``timed_out`` end without it never ran,
    as ``sim.drain_items`` reads it (the sweeper expires on the deadline ``Command`` validates, which may be a form
    this reading cannot take: an epoch number).

    >>> drain_never_ran({"status": "queued", "command": {"deadline": "2026-01-01T00:00:00+00:00"}},
    ...                 datetime(2026, 1, 1, 0, 1, tzinfo=UTC))
    True
    """
    if item is None:
        return False
    status = item.get("status")
    result = item.get("result")
    message = result.get("message", "") if isinstance(result, Mapping) else ""
    if status == CommandStatus.TIMED_OUT.value and str(message).startswith(DEADLINE_PASSED_BEFORE_START):
        return True
    started = aware_time(item.get("started_at"))
    if status == CommandStatus.TIMED_OUT.value and started is None:
        return True  # ended unstarted (the sweeper's expiry): whatever its deadline says, or whether it can be read
    command = item.get("command")
    deadline = aware_time(command.get("deadline") if isinstance(command, Mapping) else None)
    if deadline is None:
        return False
    ended = status in _ENDED_BY_THE_AGENT
    if started is None:
        # never taken up (the agent writes ``started_at`` as it takes a drain up): still queued, or a status no
        # writer of ours leaves without a start (running, unknown), past its deadline can only end unstarted
        return not ended and now > deadline
    # taken up only at or after its deadline: ended, or to end, at once (``agent.consumer.steps``), nothing evicted;
    # left ``running`` (or put back ``queued``) for good when the agent stopped between taking it up and ending it
    # (the sweeper retakes no drain past its deadline)
    return not ended and started >= deadline


# a drain's ends the agent reports as such (or the interruption Lambda's cancel, ``skipped``): trusted as ended
_ENDED_BY_THE_AGENT = frozenset(
    {CommandStatus.SUCCEEDED.value, CommandStatus.FAILED.value, CommandStatus.SKIPPED.value}
)


def drain_number(base: str, command_id: str) -> int | None:
    """``n`` of ``<base>-<n>``, the id of a drain sent again under a new id (``n`` 2 or more, ASCII decimal digits
    without a leading zero, at most ``MAX_DRAIN_NUMBER_DIGITS``; the replenisher's ``decide.builder.reissued_id``, the
    refresher's ``decide.undo.reissued_undo_id``); None for any other id, ``base`` itself included. The agent
    partition is written by more than the Lambdas, and an id of another form can never be one they write (nor
    collide with one): ``str.isdigit`` alone also accepts characters ``int`` cannot read (``giveback-<id>-²`` raised),
    and a foreign ``giveback-<id>-<180 digits>`` made the next id longer than ``Command.command_id`` allows (the
    decision raised, every tick). Pure."""
    suffix = command_id[len(base) + 1 :] if command_id.startswith(base + "-") else ""
    if _DRAIN_NUMBER.fullmatch(suffix) is None:
        return None
    return n if (n := int(suffix)) >= 2 else None


# a billion drains of one instance are never sent (one per drain timeout at most); a longer number is no id of ours
MAX_DRAIN_NUMBER_DIGITS = 9
_DRAIN_NUMBER = re.compile(f"[1-9][0-9]{{0,{MAX_DRAIN_NUMBER_DIGITS - 1}}}")


class DrainOptions(BaseModel):
    """Drain options, mirroring ``kubectl drain``'s flags one for one.

    Attributes:
        ignore_daemonsets: leave DaemonSet-managed pods (``--ignore-daemonsets``); always true here, since the
            DaemonSet controller would recreate them on the same node.
        delete_emptydir_data: evict pods using emptyDir volumes, losing that data (``--delete-emptydir-data``).
        force: evict pods that no controller manages (bare pods) (``--force``).
        grace_period_seconds: override of each pod's terminationGracePeriodSeconds; None keeps the pod's own
            (``--grace-period``).
        uncordon_on_failure: uncordon the node (only if this system cordoned it) when the drain fails or times out.
        uncordon_after_seconds: give the cordon back this many seconds after the command ended, unless another
            command, a lifecycle action or a state change came for the instance meanwhile, and only while the cordon
            is still this command's (``agent.cordons``); None keeps the cordon (set for rebalance recommendations:
            ``REBALANCE_QUIET_SECONDS``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ignore_daemonsets: bool = True
    delete_emptydir_data: bool = True
    force: bool = True
    grace_period_seconds: int | None = Field(default=None, ge=0)
    uncordon_on_failure: bool = False
    uncordon_after_seconds: int | None = Field(default=None, ge=0)


class Command(BaseModel):
    """A cordon, drain or uncordon order for the agent.

    Attributes:
        command_id: unique and deterministic for its cause (e.g. ``spot-<event id>``), so a duplicate event
            yields the same id and is recorded once.
        cluster: the kOps cluster name; the agent ignores other clusters' commands.
        instance_id: the EC2 instance whose node is the target; the agent resolves the node from
            ``spec.providerID``.
        node_name: the node's name when the sender knew it (membership); advisory only.
        deadline: when the work must be over (UTC); for a Spot warning, event time + 120 s (the event time for
            ``hibernate``: ``lambdas.interruption.decide.notice_seconds``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command_id: str = Field(min_length=1, max_length=200)
    cluster: str = Field(min_length=1)
    kind: CommandKind
    instance_id: str
    node_name: str | None = None
    reason: str = ""
    deadline: datetime
    options: DrainOptions = DrainOptions()

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, value: str) -> str:
        if not INSTANCE_ID_RE.fullmatch(value):
            raise ValueError(f"not an EC2 instance id: {value!r}")
        return value

    @field_validator("deadline")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("deadline must carry a time zone")
        return as_utc(value)

    @model_validator(mode="after")
    def _quiet_only_for_rebalance(self) -> Command:
        if self.options.uncordon_after_seconds is not None and not self.command_id.startswith(QUIET_CORDON_PREFIX):
            raise ValueError(
                f"a quiet period (options.uncordon_after_seconds) is for {QUIET_CORDON_PREFIX}* commands only,"
                f" not {self.command_id!r}"
            )
        return self

    def seconds_left(self, now: datetime) -> float:
        """Seconds from ``now`` to the deadline (negative once it passed)."""
        return (self.deadline - now).total_seconds()


class NodeRecord(BaseModel):
    """Membership: which node is which instance in which ASG (a ``NODE#<instance-id>`` item).

    Written by the agent's membership reporter; ``reported_at`` is compared by readers, since DynamoDB's TTL
    deletion lags by up to days. The reporter writes an item only when its content changes (and again before its
    TTL lapses), and marks the whole membership confirmed once per resync (the ``MEMBERSHIP`` item,
    ``adapters.dynamo.nodes``); readers put that mark's time in ``confirmed_at`` (``with_mark``), never stored.

    ``ending``: the node is cordoned with the agent's ``node-manager.aws/instance-ending`` annotation
    (``agent.kube.views.NodeView.ending``): a Spot interruption warning or a termination lifecycle action came for its
    instance, which goes away whatever its ``Ready`` condition says. ``serving`` is what a capacity count wants: Ready
    and not ending. Absent from an item an older agent wrote: False.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    instance_id: str
    node_name: str
    availability_zone: str = ""
    asg_name: str | None = None
    ready: bool = False
    unschedulable: bool = False
    ending: bool = False
    roles: list[str] = Field(default_factory=list)
    instance_group: str | None = None
    # aware times only: a naive one (no reader can compare it with the mark or the clock) is refused as bad input
    reported_at: AwareDatetime
    confirmed_at: AwareDatetime | None = None

    @property
    def serving(self) -> bool:
        """Ready and not ``ending``: a node that counts as capacity (a Ready node under a Spot warning is reclaimed
        within two minutes)."""
        return self.ready and not self.ending

    def fresh(self, now: datetime, max_age_seconds: float) -> bool:
        """Whether the record was written or confirmed (the agent's latest membership mark) at most
        ``max_age_seconds`` before ``now``."""
        seen = self.reported_at if self.confirmed_at is None else max(self.reported_at, self.confirmed_at)
        return (now - seen).total_seconds() <= max_age_seconds

    def with_mark(self, mark: datetime | None) -> NodeRecord:
        """This record confirmed by the membership mark of ``mark`` (None: no mark, the record as it is)."""
        return self if mark is None else self.model_copy(update={"confirmed_at": mark})

    @classmethod
    def confirmed(cls, item: Mapping[str, Any], mark: datetime | None) -> NodeRecord:
        """The record of a ``NODE#`` item confirmed by the mark of ``mark``: what
        ``model_validate(item).with_mark(mark)`` gives, in one validation and no copy (readers of a whole
        membership read thousands). ``item`` may be plain values or the item as the table answered it, unconverted
        (``convert=False``; not changed here): a record has no number field, its ``expires_at`` is ignored, and
        pydantic reads a ``Decimal`` in a field as it reads the int or float ``plain`` would make of it (accepted
        or refused alike).

        Raises:
            pydantic.ValidationError: the item is not a record.
        """
        return cls.model_validate(item if mark is None else {**item, "confirmed_at": mark})


def fresh_by_mark(mark: datetime | None, now: datetime, max_age_seconds: float) -> bool:
    """Whether every record confirmed by the membership mark of ``mark`` is fresh at ``now`` whatever its own
    ``reported_at`` (``NodeRecord.fresh`` counts a record's age from the later of the two): readers of a whole
    membership then need not ask each record. Pure."""
    return mark is not None and (now - mark).total_seconds() <= max_age_seconds


def parse_provider_id(provider_id: str | None) -> tuple[str, str] | None:
    """Split an AWS ``spec.providerID`` into (availability zone, instance id).

    >>> parse_provider_id("aws:///us-east-1a/i-0abc12345678def01")
    ('us-east-1a', 'i-0abc12345678def01')

    Returns None for anything else (another cloud, an empty field, a malformed id).
    """
    if not provider_id:
        return None
    match = PROVIDER_ID_RE.fullmatch(provider_id)
    if match is None:
        return None
    return match.group("az"), match.group("instance_id")


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC (a naive value is taken as UTC, as EventBridge writes ``...Z`` times).

    Raises:
        ValueError: the time cannot be expressed in UTC (e.g. ``9999-12-31T23:59:59-01:00``), so that pydantic
            reports it as a validation error instead of an ``OverflowError`` escaping the parser.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as err:
        raise ValueError(f"time out of range in UTC: {value.isoformat()}") from err


def utcnow() -> datetime:
    """The current time, aware, UTC: ``core.clock.wall_now()`` (the system clock, unless a simulation installed its
    own with ``core.clock.use_wall_clock``)."""
    return wall_now()


def to_epoch(value: datetime) -> int:
    return int(value.timestamp())


def jsonable(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")
