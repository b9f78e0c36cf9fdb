"""A launch failure delivered late (EventBridge's retries within the stack's 1-hour maximum event age; a duplicate)
that happened before its group became healthy again does not restart the recovery hold: the group's backoff already
counts it (``record_failure`` leaves it alone), and the ``healthy_since`` it would clear was observed after it
(docs/DESIGN.md invariant 7: a late event changes nothing wrongly). A failure after ``healthy_since`` still clears it
(flapping restarts the hold). Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.ledger import Backoff, Compensation, Donor, DonorState, Ledger
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, failure, group, ids, nodes_for

A, B = "nodes-us-east-1a", "nodes-us-east-1b"
HEALTHY = T0 + timedelta(minutes=40)
NOW = HEALTHY + timedelta(minutes=5)


def world() -> World:
    a = group(A, "us-east-1a", 3, ids("a", 3))
    b_ids = ids("b", 4)
    b = group(B, "us-east-1b", 4, b_ids)
    donor = Donor(
        asg_name=B,
        state=DonorState.RAISED,
        raised_by=1,
        desired_before=3,
        max_before=6,
        desired_target=4,
        max_target=6,
        raised_at=T0,
        baseline_ids=tuple(b_ids[:3]),
        instance_ids=(b_ids[3],),
    )
    comp = Compensation(pool="nodes", started_at=T0, donors={B: donor}, owed=1, healthy_since=HEALTHY)
    backoff = Backoff(last_failure_at=T0 + timedelta(minutes=20), window_seconds=300, streak=1)
    ledgers = {A: Ledger(asg_name=A, backoff=backoff, compensation=comp)}
    return World(groups={A: a, B: b}, ledgers=ledgers, nodes=nodes_for(a, b), membership_confirmed=True)


@pytest.mark.parametrize(("at", "kept"), [(T0 + timedelta(minutes=10), True), (NOW, False)])
def test_a_late_failure_from_before_the_recovery_keeps_the_hold(at: datetime, kept: bool) -> None:
    plan = decide(failure(A, at), NOW, SETTINGS, world())
    written = [a.ledger for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == A]
    comp = written[-1].compensation if written else world().ledgers[A].compensation
    assert comp is not None
    assert (comp.healthy_since == HEALTHY) is kept
