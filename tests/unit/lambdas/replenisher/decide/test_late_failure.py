"""A launch failure delivered late (EventBridge's retries within the stack's 1-hour maximum event age; a duplicate)
that happened before its group became healthy again does not restart the recovery hold: the group's backoff already
counts it (``record_failure`` leaves it alone), and the ``healthy_since`` it would clear was observed after it
(docs/DESIGN.md invariant 7: a late event changes nothing wrongly). A failure after ``healthy_since`` still clears it
(flapping restarts the hold). Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.ledger import Backoff
from lambdas.replenisher.decide import decide
from lambdas.replenisher.plan import WriteLedger
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, A, failure, recovering

HEALTHY = T0 + timedelta(minutes=40)
NOW = HEALTHY + timedelta(minutes=5)


def world() -> World:
    backoff = Backoff(last_failure_at=T0 + timedelta(minutes=20), window_seconds=300, streak=1)
    return recovering(HEALTHY, backoff)


@pytest.mark.parametrize(("at", "kept"), [(T0 + timedelta(minutes=10), True), (NOW, False)])
def test_a_late_failure_from_before_the_recovery_keeps_the_hold(at: datetime, kept: bool) -> None:
    plan = decide(failure(A, at), NOW, SETTINGS, world())
    written = [a.ledger for a in plan.actions if isinstance(a, WriteLedger) and a.ledger.asg_name == A]
    comp = written[-1].compensation if written else world().ledgers[A].compensation
    assert comp is not None
    assert (comp.healthy_since == HEALTHY) is kept
