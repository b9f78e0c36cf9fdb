"""The interruption Lambda end to end against moto (in process): what it must not act on. Instances outside the
cluster, forged warnings invoked directly, another region's or account's events, late and future events, malformed
events and non-objects: each acknowledged or rejected, logged and counted, nothing changed
(``world.py`` is the test world).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from lambdas.interruption.handler import handle
from localworld.spot_market import set_market
from tests.integration.lambdas.interruption.world import (
    EVENTS,
    FOREIGN,
    MASTER,
    NODES,
    T0,
    UNTAGGED,
    assert_nothing_changed,
    counted,
    emf,
    event,
    logs,
    member,
)

pytestmark = pytest.mark.filterwarnings(
    # handle() is called without a Lambda context here; lambda_handler registers it in production.
    "ignore:Couldn't determine the remaining time left"
)


# -- out of scope -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (FOREIGN, "other_cluster"),
        (UNTAGGED, "unmanaged_group"),
        ("bare", "not_in_asg"),
        ("unknown", "unknown_instance"),
    ],
)
def test_instances_outside_the_cluster_are_acknowledged(world, capsys, target, reason):
    groups = {name: world.members(name) for name in (NODES, MASTER, FOREIGN, UNTAGGED)}
    instance = {"bare": world.bare_instance, "unknown": "i-0fedcba9876543210"}.get(target) or groups[target][0]

    response = handle(event("spot-interruption-warning.json", instance), world.deps(), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acknowledged" and response["reason"] == reason
    assert_nothing_changed(world, groups)
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsIgnored", reason=reason) == 1
    assert any(log.get("reason") == reason and instance in log["message"] for log in logs(out))


@pytest.mark.parametrize("forgery", ["on-demand", "stopped"])
def test_a_forged_spot_warning_invoked_directly_changes_nothing(world, capsys, forgery):
    """A direct invoke can carry an aws.ec2 event EC2 never sent: for an On-Demand worker, or a stopped Spot one,
    EC2's own answer refuses it (no drain, no detach)."""
    groups = {name: world.members(name) for name in (NODES, MASTER)}
    victim = groups[NODES][0]
    member(world, victim)
    if forgery == "on-demand":
        set_market([victim], None)
    else:
        world.ec2.stop_instances(InstanceIds=[victim])
    response = handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acknowledged" and response["reason"] == "unverified"
    assert_nothing_changed(world, groups)
    assert not world.detaches()
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsRefused") == 1
    assert counted(emf(out), "EventsIgnored", reason="unverified") == 1


class NoCalls:
    """An Auto Scaling client that fails the test if the handler reads anything (an out-of-scope event reads
    nothing)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"autoscaling.{name} called for an event that is not the deployment's")


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [({"region": "eu-west-1"}, "foreign_region"), ({"account": "210987654321"}, "foreign_account")],
)
def test_another_regions_or_accounts_warning_is_acknowledged_and_counted_never_acted_on(
    world, capsys, envelope, reason
):
    """The instance id names a member of the cluster here: only the envelope says the event is not ours."""
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]
    raw = {**event("spot-interruption-warning.json", victim), **envelope}

    response = handle(raw, world.deps(autoscaling=NoCalls()), now=T0 + timedelta(seconds=1))

    assert response["status"] == "acknowledged" and response["reason"] == reason
    assert_nothing_changed(world, groups)
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsOutOfScope", reason=reason) == 1
    assert counted(emf(out), "EventsIgnored", reason=reason) == 0
    # the same warning from the deployment's own region is acted on
    assert handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0)["status"] == "acted"


def test_without_a_known_account_nothing_from_the_bus_is_acted_on(world, capsys):
    groups = {NODES: world.members(NODES)}

    response = handle(event("spot-interruption-warning.json", groups[NODES][0]), world.deps(account_id=None), now=T0)

    assert response["status"] == "acknowledged" and response["reason"] == "account_unknown"
    assert_nothing_changed(world, groups)
    assert counted(emf(capsys.readouterr().out), "EventsOutOfScope", reason="account_unknown") == 1


def test_event_five_minutes_late_is_acknowledged(world, capsys):
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]

    response = handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 + timedelta(minutes=5))

    assert response["status"] == "acknowledged" and response["reason"] == "late"
    assert_nothing_changed(world, groups)
    assert counted(emf(capsys.readouterr().out), "EventsIgnored", reason="late") == 1


def test_event_from_the_future_is_rejected_and_changes_nothing(world, capsys):
    """An event stamped 2100 would set a drain deadline no PDB retry ever reaches, and detach a live instance."""
    groups = {NODES: world.members(NODES)}
    victim = groups[NODES][0]

    response = handle(event("spot-interruption-warning.json", victim), world.deps(), now=T0 - timedelta(hours=1))

    assert response["status"] == "rejected" and response["reason"] == "time_in_future"
    assert_nothing_changed(world, groups)
    assert counted(emf(capsys.readouterr().out), "EventsRejected", reason="time_in_future") == 1


# -- malformed ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("malformed-missing-detail.json", "malformed"),
        ("malformed-bad-instance-id.json", "malformed"),
        ("malformed-wrong-detail-type.json", "unsupported_event"),
        ("malformed-unknown-instance-action.json", "malformed"),
        ("malformed-bad-time.json", "malformed"),
        ("malformed-missing-id.json", "malformed"),
    ],
)
def test_malformed_events_are_rejected_without_raising(world, capsys, fixture, reason):
    groups = {NODES: world.members(NODES)}
    raw = json.loads((EVENTS / fixture).read_text())

    response = handle(raw, world.deps())

    assert response["status"] == "rejected" and response["reason"] == reason and response["error"]
    assert_nothing_changed(world, groups)
    assert world.dynamodb.Table("idempotency").scan()["Items"] == []
    out = capsys.readouterr().out
    assert counted(emf(out), "EventsRejected", reason=reason) == 1
    [line] = [log for log in logs(out) if log["level"] == "WARNING"]
    assert line["reason"] == reason and line["message"].startswith(f"event rejected ({reason})")


@pytest.mark.parametrize("raw", [None, "hello", [], {}])
def test_non_objects_are_rejected(world, raw):
    assert handle(raw, world.deps())["status"] == "rejected"
