"""When a give-back cordon (a rebalance recommendation's) is due, kept or waited for (``agent.cordons.decisions``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cordons.decisions import RELEASING, Verdict, abandoned, judge, pending, quiet_seconds
from core.model import CommandStatus

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
INSTANCE = "i-0123456789abcdef0"


def item(
    command_id: str = "rebalance-1",
    status: str = "succeeded",
    quiet: int | None = 300,
    created: datetime = T0,
    finished: datetime | None = T0 + timedelta(seconds=1),
    ours: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    options = {"uncordon_after_seconds": quiet} if quiet is not None else {}
    return {
        "sk": f"CMD#{command_id}",
        "instance_id": INSTANCE,
        "kind": "cordon",
        "status": status,
        "created_at": created.isoformat(),
        "finished_at": finished.isoformat() if finished else None,
        "result": {"cordoned_by_us": ours, "cordoned_by_other": not ours, "node_name": "n1"},
        "command": {"command_id": command_id, "options": options},
        **extra,
    }


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        (item(), True),
        (item(resolution=RELEASING), True),  # a claim left by an agent that stopped midway
        (item(resolution="released"), False),
        (item(resolution="escalated by spot-1"), False),
        (item(quiet=None), False),  # a command that keeps its cordon
        (item(status="running"), False),  # not ended yet
        (item(status="queued"), False),
    ],
)
def test_which_commands_are_pending(candidate: dict[str, Any], expected: bool) -> None:
    assert pending(candidate) is expected


def test_a_quiet_cordon_waits_for_its_period_then_is_released() -> None:
    cordon = item()
    waiting = judge(cordon, [cordon], None, T0 + timedelta(seconds=300))
    assert waiting.verdict is Verdict.WAIT and waiting.due_at == T0 + timedelta(seconds=301)
    assert judge(cordon, [cordon], None, T0 + timedelta(seconds=301)).verdict is Verdict.RELEASE


def test_a_later_command_for_the_instance_keeps_the_cordon() -> None:
    cordon = item()
    spot = item("spot-1", quiet=None, created=T0 + timedelta(seconds=60))
    judgement = judge(cordon, [spot, cordon], None, T0 + timedelta(hours=1))
    assert judgement.verdict is Verdict.KEEP and "spot-1" in judgement.why


def test_an_earlier_command_for_the_instance_does_not() -> None:
    cordon = item()
    before = item("refresh-1", quiet=None, created=T0 - timedelta(hours=2))
    assert judge(cordon, [before, cordon], None, T0 + timedelta(hours=1)).verdict is Verdict.RELEASE


def test_a_lifecycle_action_after_the_cordon_keeps_it() -> None:
    cordon = item()
    hook = {"recorded_at": (T0 + timedelta(seconds=30)).isoformat()}
    assert judge(cordon, [cordon], hook, T0 + timedelta(hours=1)).verdict is Verdict.KEEP
    old_hook = {"recorded_at": (T0 - timedelta(days=1)).isoformat()}
    assert judge(cordon, [cordon], old_hook, T0 + timedelta(hours=1)).verdict is Verdict.RELEASE


@pytest.mark.parametrize(
    "held_nothing",
    [item(ours=False), item(status="skipped")],
    ids=["cordoned by someone else", "no node"],
)
def test_a_command_that_holds_no_cordon_of_ours_is_kept_at_once(held_nothing: dict[str, Any]) -> None:
    assert judge(held_nothing, [held_nothing], None, T0).verdict is Verdict.KEEP


@pytest.mark.parametrize(
    "drain",
    [
        item(status="timed_out"),
        item(status="failed"),  # cordoned, then an eviction refused for good
        item(status="timed_out", result={"node_name": "n1"}),  # late for its deadline: no cordoned_by_us recorded
    ],
    ids=["timed out", "failed", "late: result built without the engine"],
)
def test_a_rebalance_drain_that_did_not_succeed_is_given_back_too(drain: dict[str, Any]) -> None:
    # whether the node still carries its cordon is decided at the node (decide_release)
    assert judge(drain, [drain], None, T0 + timedelta(seconds=100)).verdict is Verdict.WAIT
    assert judge(drain, [drain], None, T0 + timedelta(hours=1)).verdict is Verdict.RELEASE


@pytest.mark.parametrize(
    "shape",
    [
        {"command": "not a map"},
        {"command": {"command_id": "rebalance-1", "options": "not a map"}},
        {"command": {"command_id": "rebalance-1", "options": {"uncordon_after_seconds": "soon"}}},
        {"command": {"command_id": "rebalance-1", "options": {"uncordon_after_seconds": 1.5}}},
        {"command": {"command_id": "rebalance-1", "options": {"uncordon_after_seconds": -1}}},
        {"command": {"command_id": "rebalance-1", "options": {"uncordon_after_seconds": True}}},
        {"command": {"command_id": "rebalance-1", "options": {"uncordon_after_seconds": Decimal("NaN")}}},
    ],
)
def test_an_item_of_another_shape_is_no_give_back_command(shape: dict[str, Any]) -> None:
    assert pending({**item(), **shape}) is False  # never raises


def test_a_quiet_period_read_from_the_table_is_one() -> None:
    table = item(quiet=None, command={"command_id": "rebalance-1", "options": {"uncordon_after_seconds": Decimal(300)}})
    assert pending(table) and judge(table, [table], None, T0 + timedelta(seconds=302)).verdict is Verdict.RELEASE


def test_an_unreadable_sibling_or_result_neither_raises_nor_supersedes() -> None:
    cordon = item()
    junk = {"sk": "CMD#drain-junk", "instance_id": INSTANCE, "command": "not a map", "created_at": "garbage"}
    assert judge(cordon, [junk, cordon], None, T0 + timedelta(hours=1)).verdict is Verdict.RELEASE
    odd = item(result="not a map")  # says nothing of the cordon: the node decides (decide_release)
    assert judge(odd, [odd], None, T0 + timedelta(hours=1)).verdict is Verdict.RELEASE


ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.floats(allow_nan=True),
    st.sampled_from([RELEASING, "released", "", "soon"]),
    st.dictionaries(st.sampled_from(["uncordon_after_seconds", "x"]), st.integers(-2, 2), max_size=2),
)


@given(
    resolution=ODD_VALUES,
    quiet=ODD_VALUES,
    status=st.one_of(st.sampled_from([s.value for s in CommandStatus]), ODD_VALUES),
    options_map=st.booleans(),
)
def test_pending_reading_the_resolution_first_decides_as_the_quiet_period_first(
    resolution: Any, quiet: Any, status: Any, options_map: bool
) -> None:
    """``pending`` looks at ``resolution`` before the quiet period (most items a check reads are resolved): the
    same answer as the quiet period first, and neither raises, whatever the values."""
    options = {"uncordon_after_seconds": quiet} if options_map else quiet
    candidate = {**item(), "status": status, "resolution": resolution, "command": {"options": options}}
    try:
        terminal = CommandStatus(str(candidate.get("status", ""))).terminal
    except ValueError:
        terminal = False
    general = quiet_seconds(candidate) is not None and candidate.get("resolution") in (None, RELEASING) and terminal
    assert pending(candidate) is general


def left_running(**extra: Any) -> dict[str, Any]:
    """A rebalance drain its worker started at ``T0`` and last beat for at ``T0`` (stale after 60 s), due at
    ``T0 + 600 s``."""
    base = item(status="running", finished=None, heartbeat_at=Decimal(str(T0.timestamp())), stale_after_seconds=60)
    base["command"]["deadline"] = (T0 + timedelta(seconds=600)).isoformat()
    return {**base, **extra}


LATE = T0 + timedelta(seconds=601)


@pytest.mark.parametrize(
    ("candidate", "now", "expected"),
    [
        (left_running(), LATE, T0),
        (left_running(), T0 + timedelta(seconds=600), None),  # its deadline not passed: its drain may be at it
        (left_running(heartbeat_at=Decimal(str(LATE.timestamp())) - 30), LATE, None),  # its worker beat 30 s ago
        (left_running(stale_after_seconds=3600), LATE, None),  # stale by its worker's own measure only
        (left_running(stale_after_seconds=None), LATE, T0),  # none recorded: the agent's default 60 s
        (
            left_running(deadline_tightened_to=(T0 + timedelta(seconds=120)).isoformat()),
            T0 + timedelta(seconds=121),
            T0,
        ),
        (left_running(resolution="escalated by spot-1"), LATE, None),
        (left_running(status="succeeded"), LATE, None),
        (left_running(status="queued"), LATE, None),  # the sweeper's: it expires a queued one past its deadline
        (left_running(heartbeat_at="soon"), LATE, None),
        (left_running(heartbeat_at=Decimal("-1e30")), LATE, None),  # no clock reads it
        (left_running(command={"command_id": "rebalance-1", "options": {"uncordon_after_seconds": 300}}), LATE, None),
        (left_running(command={"command_id": "rebalance-1", "options": {}, "deadline": T0.isoformat()}), LATE, None),
    ],
    ids=[
        "abandoned",
        "before its deadline",
        "heartbeat fresh",
        "stale after an hour",
        "default staleness",
        "tightened deadline passed",
        "resolved",
        "ended",
        "queued",
        "heartbeat unreadable",
        "heartbeat out of range",
        "deadline unreadable",
        "no quiet period",
    ],
)
def test_a_give_back_command_left_running_past_its_deadline_by_a_stale_worker_is_abandoned(
    candidate: dict[str, Any], now: datetime, expected: datetime | None
) -> None:
    assert abandoned(candidate, now) == expected
