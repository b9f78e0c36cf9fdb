"""sim.actors: every kind of schedule entry applies to a small world and does what it says; the world's invariants
hold through all of them."""

from __future__ import annotations

from sim.run import run_seed
from sim.schedules import KINDS
from tests.unit.sim.fault_entry import entry

SCHEDULE = (
    entry(60, "spot", az="us-east-1a", count=1),
    entry(120, "spot_burst", 120, az="us-east-1b", count=2),
    entry(200, "rebalance", 300, az="us-east-1c", follow=1),
    entry(300, "outage", 900, az="us-east-1a"),
    entry(400, "api", 120, service="autoscaling", operation="", code="Throttling", probability=0.5),
    entry(500, "crash", 300, function="replenisher", call=2, how="timeout"),
    entry(600, "concurrent", 600, function="interruption", call=2, other="interruption"),
    entry(700, "late_event", delay=60),
    entry(800, "bad_event", variant="malformed"),
    entry(810, "bad_event", variant="foreign_region"),
    entry(820, "forged_message", variant="garbage"),
    entry(830, "forged_message", variant="no_record"),
    entry(1090, "forged_message", variant="mismatch"),  # a copy of the next command sent (the refresh's drains)
    entry(900, "agent_restart", leader=0),
    entry(950, "agent_restart", leader=1),
    entry(0, "kops_spec", az="us-east-1a", below=1, above=2),  # room from the start
    entry(1000, "kops_reset", az="us-east-1b"),
    entry(1100, "manual_refresh", az="us-east-1c", max_surge=2),
    entry(1200, "kops_spec", az="us-east-1c", below=0, above=1),  # under the refresh's two surge units
    entry(1300, "foreign_terminate", az="us-east-1c", target="spare", decrement=1),  # and a spare of it taken
    entry(1400, "cancel_refresh", az="us-east-1c"),
    entry(1500, "operator_cordon", 1800, az="us-east-1b"),
    entry(1600, "pdb_block", 1200),
    entry(1700, "node_not_ready", 600, master=0, pick=0.5),
    entry(1800, "bad_bootstrap", 1800, az="us-east-1c", never=1),
)


def test_every_kind_applies_and_the_invariants_hold() -> None:
    assert {f.kind for f in SCHEDULE} == set(KINDS)
    result = run_seed(9, nodes=9, days=0.25, schedule=SCHEDULE, trace=True)
    assert result.violation is None, result.summary()
    trace = "\n".join(result.trace)
    assert trace.count("fault ") >= len(SCHEDULE)
    assert "EC2 Spot Instance Interruption Warning" in trace
    assert "EC2 Instance Rebalance Recommendation" in trace
    assert "refresher ok started" in trace or "refresher ok refused" in trace
    assert "replenisher timeout" in trace
    assert result.counters["events"] > 5


def test_a_reclaim_during_an_outage_is_compensated_and_given_back() -> None:
    """A Spot reclaim in an AZ without capacity: the replenisher raises a sibling under the lock (COMP# first), the
    shortfall is covered within the bound, and once the AZ recovers everything ends at its kOps sizes."""
    schedule = (
        entry(60, "outage", 3 * 3600, az="us-east-1a"),
        entry(300, "spot", az="us-east-1a", count=1),
        entry(900, "spot", az="us-east-1a", count=1),
    )
    result = run_seed(3, nodes=9, days=0.5, schedule=schedule, trace=True)
    assert result.violation is None, result.summary()
    trace = "\n".join(result.trace)
    assert "EC2 Instance Launch Unsuccessful" in trace
    assert "replenisher ok acted" in trace
