"""``Unwell.unknown``: invariant 2 does not blame a master's termination on another master NotReady that no Lambda
could know of: NotReady within ``MEMBERSHIP_LAG_SECONDS``, or since the agent's last ``MEMBERSHIP`` mark while that
mark is one the refresher still trusts (storm seed 185279's shrunk schedule: the agent's Kubernetes reads refused).
Never a master the agent reported after, nor one under a mark past the refresher's ``MEMBERSHIP_MAX_AGE_SECONDS``."""

from __future__ import annotations

from datetime import timedelta

from sim.health import MEMBERSHIP_LAG_SECONDS, Unwell
from sim.kernel import EPOCH


def mark(at: float) -> dict[str, object]:
    return {"sk": "MEMBERSHIP", "reported_at": (EPOCH + timedelta(seconds=at)).isoformat()}


def test_a_master_gone_not_ready_lately_is_unknown_whatever_the_mark() -> None:
    unwell = Unwell({"m2": (1000.0, True)})
    assert unwell.unknown("m2", 1000.0 + MEMBERSHIP_LAG_SECONDS - 1, mark(1050.0))
    assert unwell.unknown("m2", 1000.0 + MEMBERSHIP_LAG_SECONDS - 1, None)


def test_one_the_agent_has_not_reported_since_is_unknown_while_its_last_mark_is_trusted() -> None:
    unwell = Unwell({"m2": (1000.0, True)}, mark_max_age=600.0)
    assert unwell.unknown("m2", 1500.0, mark(950.0))  # 307 s NotReady, the mark 550 s old
    assert not unwell.unknown("m2", 1551.0, mark(950.0))  # the mark 601 s old: nothing counts as Ready
    assert not unwell.unknown("m2", 1500.0, mark(1020.0))  # the agent reported since: the refresher could know
    assert not unwell.unknown("m2", 1500.0, None) and not unwell.unknown("m2", 1500.0, {"sk": "MEMBERSHIP"})


def test_a_node_no_fault_holds_is_never_excused() -> None:
    assert not Unwell().unknown("m1", 10.0, mark(0.0))
