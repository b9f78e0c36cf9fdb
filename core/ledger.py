"""The compensation ledger: one ``COMP#<asg>`` item per Auto Scaling group the replenisher has dealt with.

What it holds (DESIGN.md, "Table items"):

- ``backoff``: the group's launch-failure history (``Backoff``): when it last failed, until when it is not trusted,
  and the current window (5 min, doubling, capped at 30 min, reset after 3 h clean: ``ReplenisherSettings``).
- ``compensation``: present while the group is owed capacity (``Compensation``): how much is owed, which donor
  group was raised by how much (``Donor``: desired and MaxSize before, the targets, which instance ids were claimed
  as the compensating ones), and, during the give-back, each instance's step (``GiveBack``).

Every step the replenisher takes is written here *before* it acts (``Donor.state`` ``intended`` before the raise,
``GiveBack.state`` ``terminating`` before the terminate), so the next invocation finds where a crashed one stopped
and completes it: actions are absolute (set desired to the recorded target; terminate this instance id), never
relative, so redoing one is harmless.

Writes (``adapters.dynamo.ledger``) are whole-item puts conditioned on ``version`` (optimistic concurrency, besides
the cluster lock); ``LedgerConflictError`` means someone else wrote the item since it was read.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class DonorState(str, Enum):
    INTENDED = "intended"  # recorded, desired capacity not yet raised
    RAISED = "raised"  # desired (and MaxSize, if needed) raised
    RESTORED = "restored"  # every compensating instance given back, MaxSize restored


class GiveBackState(str, Enum):
    DRAINING = "draining"  # drain command recorded and sent; waiting for its terminal status
    TERMINATING = "terminating"  # terminate intended (recorded before the call)
    TERMINATED = "terminated"  # terminated with ShouldDecrementDesiredCapacity=true
    GONE = "gone"  # left the donor group on its own (interrupted, detached, terminated by someone else)
    KEPT = "kept"  # not given back: the donor's own sizes need it now (MinSize raised by kOps or a person)


class Backoff(BaseModel):
    """Launch-failure history of one group.

    Attributes:
        last_failure_at: time of the latest "EC2 Instance Launch Unsuccessful" (UTC), or None.
        window_seconds: the current backoff window (0: never failed).
        streak: how many windows in a row ended with a new failure (1 for the first).
    """

    model_config = ConfigDict(frozen=True)

    last_failure_at: datetime | None = None
    window_seconds: int = 0
    streak: int = 0

    @property
    def until(self) -> datetime | None:
        """When the group is trusted again (last failure + window), or None if it never failed."""
        if self.last_failure_at is None:
            return None
        return self.last_failure_at + timedelta(seconds=self.window_seconds)

    def in_backoff(self, now: datetime) -> bool:
        until = self.until
        return until is not None and now < until


class Donor(BaseModel):
    """A sibling group raised to cover the failed one.

    Attributes:
        asg_name: the donor group.
        raised_by: how many instances it carries for the failed group.
        desired_before, max_before: its own DesiredCapacity and MaxSize, before any compensation raised it: its
            sizes when first raised for this ledger, or, when another ledger already carried a raise on it, the
            sizes that ledger recorded (``lambdas.replenisher.decide.compensate.own_sizes``).
        desired_target, max_target: what the raise sets (absolute values, so a redo is harmless).
        baseline_ids: its instance ids before the raise (never claimed as compensating).
        instance_ids: the compensating instances claimed so far (new ids, at most ``raised_by`` alive).
        returned: how many were given back (terminated with decrement).
        reset_at: when the donor was last found holding less than this raise (kOps or a person reset its sizes);
            ``raised_by`` was then lowered to what it really holds, and it is not raised again for
            ``RESET_HOLD_SECONDS`` (``lambdas.replenisher.decide.reality``).
        asked_since: during the give-back, since when an ask of this donor (a lowering of a raise that never
            launched, a terminate with decrement, a MaxSize restore) has not been read back done; written before the
            first such call. ``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS`` after it the donor is closed out, what it still
            holds left raised (``Ledger.left_raised``). None: nothing asked and not read back.
        cancel_to, cancelling: a lowering asked (the desired capacity asked, and the units it gives back), written
            before the call; the units count as ``returned`` only once a later invocation reads the donor's desired
            capacity at or below ``cancel_to``.
        max_asked: a MaxSize restore asked, written before the call; the donor is ``restored`` only once a later
            invocation reads the restore back.
    """

    model_config = ConfigDict(frozen=True)

    asg_name: str
    state: DonorState = DonorState.INTENDED
    raised_by: int = Field(ge=0)
    desired_before: int
    max_before: int
    desired_target: int
    max_target: int
    raised_at: datetime
    baseline_ids: tuple[str, ...] = ()
    instance_ids: tuple[str, ...] = ()
    returned: int = 0
    reset_at: datetime | None = None
    asked_since: datetime | None = None
    cancel_to: int | None = None
    cancelling: int = 0
    max_asked: int | None = None


class GiveBack(BaseModel):
    """One compensating instance on its way out."""

    model_config = ConfigDict(frozen=True)

    instance_id: str
    donor: str
    command_id: str
    state: GiveBackState = GiveBackState.DRAINING
    deadline: datetime
    updated_at: datetime


class Compensation(BaseModel):
    """What the failed group is owed and how it is covered.

    Attributes:
        pool: the compensation pool (``core.kops.pool_of``).
        owed: the shortfall being covered (sum of the donors' ``raised_by``, unless no donor had room).
        started_at: first raise intent.
        healthy_since: since when the failed group has held its desired count of Ready nodes (None: not now).
        returning: the give-back has started (no new raise for this ledger from then on).
        donors: donor group -> ``Donor``.
        give_back: instance id -> ``GiveBack``.
        notes: what happened that an operator should know (an interrupted compensating instance, a resized donor).
    """

    model_config = ConfigDict(frozen=True)

    pool: str | None = None
    owed: int = 0
    started_at: datetime
    healthy_since: datetime | None = None
    returning: bool = False
    donors: dict[str, Donor] = Field(default_factory=dict)
    give_back: dict[str, GiveBack] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


class LeftRaised(BaseModel):
    """What a give-back left raised on one donor when its asks were not read back within
    ``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS`` (refused for good: AccessDenied, a validation error after kOps changed the
    group's sizes): the operator's to lower.

    Attributes:
        at: when the donor was closed out.
        donor: the donor group.
        units: desired-capacity units still raised for the ledger (above the donor's own size).
        desired: the donor's desired capacity as read then.
        max_size: its MaxSize as read then, when a restore was still owed (None: MaxSize not left raised).
        max_before: the MaxSize to restore it to.
        why: the ask that was not read back.
    """

    model_config = ConfigDict(frozen=True)

    at: datetime
    donor: str
    units: int = 0
    desired: int
    max_size: int | None = None
    max_before: int
    why: str = ""

    def describe(self) -> str:
        parts = [f"{self.units} unit(s) above its own size (desired {self.desired})"] if self.units else []
        if self.max_size is not None:
            parts.append(f"MaxSize {self.max_size} (was {self.max_before})")
        return f"{self.donor}: {' and '.join(parts) or 'nothing'} left raised at {self.at.isoformat()}" + (
            f" ({self.why})" if self.why else ""
        )


LEFT_RAISED_KEPT = 5  # a ledger keeps its newest close-outs only


class Ledger(BaseModel):
    """The ``COMP#<asg_name>`` item.

    Attributes:
        left_raised: the newest close-outs of this group's give-backs past their deadline (``LeftRaised``, at most
            ``LEFT_RAISED_KEPT``), kept after the compensation is cleared, for ``status`` and the operator.
    """

    model_config = ConfigDict(frozen=True)

    asg_name: str
    backoff: Backoff = Backoff()
    compensation: Compensation | None = None
    left_raised: tuple[LeftRaised, ...] = ()
    version: int = 0
    updated_at: datetime | None = None
