"""``core.model.drain_never_ran``: the one reading of a drain ``CMD#`` item (plain values) that says no drain ran by
its deadline. The replenisher's give-back and surplus cleanup and the refresher's undo drain all read it; before, each
Lambda kept its own copy (``decide.builder.never_ran``, ``decide.undo.never_ran``) that differed at the edges. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.model import DEADLINE_PASSED_BEFORE_START, drain_never_ran

DEADLINE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BEFORE, AFTER = DEADLINE - timedelta(minutes=1), DEADLINE + timedelta(minutes=1)


def _item(
    status: str, started: datetime | None = None, message: str | None = None, deadline: object = DEADLINE
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "status": status,
        "command": {"deadline": deadline.isoformat() if isinstance(deadline, datetime) else deadline},
    }
    if started is not None:
        item["started_at"] = started.isoformat()
    if message is not None:
        item["result"] = {"status": status, "message": message}
    return item


@pytest.mark.parametrize(
    ("item", "now", "never"),
    [
        (None, AFTER, False),  # not recorded (or unreadable): the caller decides
        (_item("queued"), BEFORE, False),  # still queued, time left: it may still run
        (_item("queued"), DEADLINE, False),  # at the deadline, not past it
        (_item("queued"), AFTER, True),  # queued past its deadline: can only end unstarted
        (_item("timed_out"), BEFORE, True),  # expired queued by the sweeper: never started
        (_item("timed_out", BEFORE - timedelta(minutes=4)), AFTER, False),  # ran, then its deadline passed
        (_item("timed_out", DEADLINE), AFTER, True),  # started only at its deadline: nothing evicted
        (_item("timed_out", AFTER), AFTER, True),  # started after it
        (_item("timed_out", BEFORE, DEADLINE_PASSED_BEFORE_START + " (slot)"), AFTER, True),  # waited for a slot
        (_item("timed_out", BEFORE, DEADLINE_PASSED_BEFORE_START, "not a time"), AFTER, True),  # the agent's word
        (_item("timed_out", deadline="not a time"), AFTER, True),  # ended unstarted: no deadline needed to say so
        (_item("timed_out", deadline=1764590400), AFTER, True),  # an epoch deadline (``Command`` reads it, we do not)
        (_item("timed_out", BEFORE, deadline="not a time"), AFTER, False),  # started: no deadline to judge it by
        (_item("queued", deadline="2026-12-01T12:00:00"), AFTER, False),  # a time without a zone: unreadable
        (_item("running", BEFORE), AFTER, False),  # running: the agent has it
        (_item("running", DEADLINE), AFTER, True),  # taken up at its deadline: ends unstarted, or never ends
        (_item("running", AFTER), AFTER, True),
        (_item("running", deadline="not a time"), AFTER, False),  # no start, no deadline: not to be judged
        (_item("succeeded", BEFORE), AFTER, False),
        (_item("skipped"), AFTER, False),  # no node: nothing to drain, nothing wrong with the terminate
        (_item("failed", BEFORE, DEADLINE_PASSED_BEFORE_START), AFTER, False),  # only a timed_out end says it
        ({"status": "timed_out", "command": "not a map", "result": "nor this"}, AFTER, True),  # never started
        ({"status": "timed_out", "started_at": "garbage", "command": {}}, AFTER, True),  # no time it started
        # never taken up, past its deadline, under a status none of ours writes without a start: never ran
        ({"status": "mystery", "command": {"deadline": BEFORE.isoformat()}}, AFTER, True),
        ({"status": "mystery", "command": {"deadline": AFTER.isoformat()}}, BEFORE, False),  # time left
        ({"status": "running", "command": {"deadline": BEFORE.isoformat()}}, AFTER, True),
        ({"status": "succeeded", "command": {"deadline": BEFORE.isoformat()}}, AFTER, False),  # the agent's end
        (_item("queued", DEADLINE), AFTER, True),  # put back queued after a late take-up
        (_item("queued", BEFORE), AFTER, False),  # put back after it ran a while: it ran
        ({"status": None, "command": None, "result": None, "started_at": 5}, AFTER, False),
    ],
)
def test_which_drain_items_never_ran(item: dict[str, Any] | None, now: datetime, never: bool) -> None:
    assert drain_never_ran(item, now) is never


def test_both_lambdas_read_it_from_core() -> None:
    """One reading: the replenisher and the refresher call this function, and neither keeps a copy."""
    from importlib import import_module

    undo, builder, cleanup, give_back = (
        import_module(f"lambdas.{name}")
        for name in (
            "refresher.decide.undo",
            "replenisher.decide.builder",
            "replenisher.decide.cleanup",
            "replenisher.decide.give_back",
        )
    )

    assert cleanup.drain_never_ran is give_back.drain_never_ran is undo.drain_never_ran is drain_never_ran
    assert not hasattr(builder, "never_ran") and not hasattr(undo, "never_ran")
