"""Whether a give-back cordon is due (pure): one ``CMD#`` item, the instance's other items, its ``HOOK#``, the clock.

A command qualifies when it carries ``options.uncordon_after_seconds`` and has no ``resolution`` yet (or the
releaser's own ``releasing`` claim, left by an agent that stopped midway). Its cordon is:

- **kept** (resolved, never given back) when the command can hold no cordon of ours (ended ``skipped``: no node;
  or its result says the node was cordoned by someone else), when another command for the instance was recorded
  after it (a Spot drain, a lifecycle drain, a refresh: the instance is going or being handled), when a Spot warning
  tightened its deadline (``deadline_tightened_to``: its instance ends then, one drain not two; kept even when the
  Lambda's own resolution was lost and no heartbeat marked the node ``instance-ending``), or when a termination
  lifecycle action of the instance was recorded after it;
- **released** once ``finished_at + uncordon_after_seconds`` has passed;
- otherwise **waited** for (``due_at`` says until when).

A command left ``running`` past its deadline by a worker that stopped (its heartbeat stale by the worker's own
``stale_after_seconds``) is ``abandoned``: its message may be gone (dead-lettered) and the sweeper sends none past the
deadline, so nothing else would ever end it; the releaser ends it ``timed_out`` as of its worker's last heartbeat
(``adapters.dynamo.commands.end_abandoned_command``), and the next check judges it as any other.

An item of another shape (a ``command`` or ``options`` that is not a map, a quiet period that is not a non-negative
integer, unreadable times) is read as carrying nothing: never pending, never superseding; a ``result`` that is not a
map says nothing of the cordon (the node decides, below); nothing here raises on it.

Whether the node still carries this command's cordon is decided at the node (``agent.drain.cordon.decide_release``):
an operator's cordon, a cordon a later command took over and a cordon marked ``instance-ending`` are left. So a
command that ended ``failed`` (a drain that cordoned, then met an eviction refused for good), or whose result does
not say ``cordoned_by_us`` (a drain whose deadline passed before it started: the consumer builds that result without
the engine, after its fast step cordoned the node), is judged like any other: its cordon, if the node still carries
it, is given back after the quiet period.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any

from core.model import CommandStatus, as_utc

RELEASING = "releasing"  # the releaser's claim: set before it uncordons, replaced by the outcome
RELEASED = "released"


class Verdict(str, Enum):
    WAIT = "wait"
    RELEASE = "release"
    KEEP = "keep"


@dataclass(frozen=True)
class Judgement:
    """The verdict on one command: ``why`` for logs and the item's ``resolution`` (KEEP), ``due_at`` for WAIT."""

    verdict: Verdict
    why: str = ""
    due_at: datetime | None = None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def command_id(item: Mapping[str, Any]) -> str:
    """The id of a ``CMD#`` item (its ``command.command_id``, else its sort key without ``CMD#``)."""
    return str(_map(item.get("command")).get("command_id") or str(item.get("sk", "")).removeprefix("CMD#"))


def quiet_seconds(item: Mapping[str, Any]) -> int | None:
    """The command's ``options.uncordon_after_seconds`` (an integer, a table number or a plain one), None when it
    keeps its cordon or the value is no non-negative integer (``command`` or ``options`` not a map included)."""
    value = _map(_map(item.get("command")).get("options")).get("uncordon_after_seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    try:
        whole = int(value)
    except (OverflowError, ValueError):  # inf, nan
        return None
    return whole if whole == value and whole >= 0 else None


def pending(item: Mapping[str, Any]) -> bool:
    """True for a command whose cordon may still be given back: it carries a quiet period, it ended, and no
    resolution is recorded (or only the releaser's own claim). The resolution is looked at first: most of the
    rebalance commands a check reads (a week's, about 100 at 1,000 nodes) are resolved, and neither test raises."""
    if item.get("resolution") not in (None, RELEASING) or quiet_seconds(item) is None:
        return False
    try:
        return CommandStatus(str(item.get("status", ""))).terminal
    except ValueError:
        return False


# a worker's staleness when its item names none (the agent's default ``STALE_RUNNING_SECONDS``)
STALE_AFTER_SECONDS = 60


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def abandoned(item: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the worker of a give-back command left ``running`` was last seen (its ``heartbeat_at``, aware), if it
    is abandoned at ``now``: it carries a quiet period and no resolution, its deadline (or the earlier
    ``deadline_tightened_to``) has passed, and its heartbeat is older than its ``stale_after_seconds`` (else
    ``STALE_AFTER_SECONDS``). None otherwise, or when a time is unreadable. Pure."""
    if item.get("resolution") is not None or quiet_seconds(item) is None:
        return None
    if item.get("status") != CommandStatus.RUNNING.value:
        return None
    heartbeat = _number(item.get("heartbeat_at"))
    deadline = _time(_map(item.get("command")).get("deadline"))
    if heartbeat is None or deadline is None:
        return None
    tightened = _time(item.get("deadline_tightened_to"))
    ends = min(deadline, tightened) if tightened is not None else deadline
    stale = _number(item.get("stale_after_seconds"))
    if now <= ends or heartbeat + (STALE_AFTER_SECONDS if stale is None else stale) >= now.timestamp():
        return None
    try:
        return datetime.fromtimestamp(heartbeat, tz=UTC)
    except (OverflowError, OSError, ValueError):  # a heartbeat no clock reads (a forged item)
        return None


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return as_utc(datetime.fromisoformat(str(value)))
    except ValueError:
        return None


def judge(
    item: Mapping[str, Any], others: Iterable[Mapping[str, Any]], hook: Mapping[str, Any] | None, now: datetime
) -> Judgement:
    """Judge one pending command (see the module docstring). Pure.

    Args:
        item: the command's ``CMD#`` item (``pending(item)`` holds).
        others: the ``CMD#`` items of the same instance (the item itself may be among them).
        hook: the instance's ``HOOK#`` item, if any (``recorded_at``).
        now: the current time (aware).
    """
    own = command_id(item)
    status = str(item.get("status"))
    result = _map(item.get("result"))
    if status == CommandStatus.SKIPPED.value:
        return Judgement(Verdict.KEEP, "nothing to give back: the command skipped (no node)")
    if result.get("cordoned_by_other") is True:
        return Judgement(
            Verdict.KEEP, "nothing to give back: the node was not cordoned by this command but by someone else"
        )
    if item.get("deadline_tightened_to"):  # a Spot warning took this drain over (one drain, not two)
        return Judgement(Verdict.KEEP, f"its instance ends: its deadline was tightened by {item.get('tightened_by')}")
    created = _time(item.get("created_at"))
    for other in others:
        other_created = _time(other.get("created_at"))
        if command_id(other) == own or other_created is None:
            continue
        if created is None or other_created > created:
            return Judgement(Verdict.KEEP, f"superseded by {command_id(other)} ({other.get('kind')})")
    hooked = _time((hook or {}).get("recorded_at"))
    if hooked is not None and (created is None or hooked > created):
        return Judgement(Verdict.KEEP, "a termination lifecycle action came for the instance")
    ended = _time(item.get("finished_at")) or created
    seconds = quiet_seconds(item)
    if ended is None or seconds is None:
        return Judgement(Verdict.KEEP, "no end time or quiet period recorded")
    due = ended + timedelta(seconds=seconds)
    if now < due:
        return Judgement(Verdict.WAIT, f"quiet until {due.isoformat()}", due_at=due)
    return Judgement(Verdict.RELEASE, f"quiet for {seconds} s since {ended.isoformat()}")
