"""Masters, surplus and unregistered instances, crashes, the lock, and foreign events."""

from __future__ import annotations

import pytest

from adapters.dynamo.lock import LeaseLock
from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState
from lambdas.replenisher.plan import Terminate, WriteLedger
from localworld.cluster import create_foreign_asg
from localworld.eventbus import launch_event
from tests.integration.lambdas.replenisher.conftest import Rig, load_event


class Crash(Exception):
    pass


def test_launch_failure_of_a_master_group_is_never_compensated(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.master_asgs["us-east-1a"])
    before = rig.sizes()
    response = rig.failure("us-east-1a", rig.at(0), kind="master")
    assert rig.sizes() == before
    assert any("control_plane" in a["action"] for a in response["actions"])
    assert response["operation"] is None


def test_surplus_master_is_removed(rig: Rig) -> None:
    name = rig.info.master_asgs["us-east-1b"]
    rig.report_membership(rig.at(0))
    rig.autoscaling.update_auto_scaling_group(AutoScalingGroupName=name, MaxSize=2, DesiredCapacity=2)
    group = rig.group("us-east-1b", kind="master")
    assert len(group["Instances"]) == 2
    member = next(
        i["InstanceId"] for i in group["Instances"] if rig.deps.store.get(f"NODE#{i['InstanceId']}") is not None
    )
    response = rig.tick(rig.at(0.5))  # the new one has no node yet: surplus, terminated at once
    assert response["operation"] == "surplus-cleanup"
    group = rig.group("us-east-1b", kind="master")
    assert [i["InstanceId"] for i in group["Instances"]] == [member]
    assert group["DesiredCapacity"] == 1


def test_unregistered_instance_past_provision_time_is_replaced(rig: Rig) -> None:
    name = rig.info.worker_asgs["us-east-1c"]
    stray = rig.group("us-east-1c")["Instances"][0]["InstanceId"]
    rig.report_membership(rig.at(0), skip={stray})
    response = rig.tick(rig.at(10))  # within 15 min of its launch: left alone
    assert response["operation"] is None
    rig.report_membership(rig.at(16), skip={stray})
    response = rig.tick(rig.at(16))
    assert response["operation"] == "surplus-cleanup"
    ids = {i["InstanceId"] for i in rig.group("us-east-1c")["Instances"]}
    assert stray not in ids and len(ids) == 2  # replaced by the group (no decrement)
    assert rig.group("us-east-1c")["DesiredCapacity"] == 2
    assert name


def test_unregistered_capacity_of_a_refresh_run_or_replacement_is_never_surplus(rig: Rig) -> None:
    spare = rig.group("us-east-1c")["Instances"][0]["InstanceId"]
    replacement = rig.group("us-east-1b")["Instances"][0]["InstanceId"]
    rig.report_membership(rig.at(16), skip={spare, replacement})
    old = rig.group("us-east-1c")["Instances"][1]["InstanceId"]
    surge = GroupSurge(name="refreshed", role="node", min_size=0, original_desired=2, original_max=4, raised=1)
    step = RunStep(
        index=0, group="refreshed", role="node", instance_id=old, state=StepState.SURGING, surge_instance_id=spare
    )
    at = rig.at(16)
    run = Run(
        run_id="r1", cluster="c", options=RunOptions(), groups=[surge], steps=[step], created_at=at, updated_at=at
    )
    rig.deps.store.put("RUN#r1", run.to_item())
    rig.deps.store.put(f"DETACH#{replacement}", {"state": "detached"})
    response = rig.tick(rig.at(16))
    assert response["operation"] is None
    ids = {i["InstanceId"] for az in rig.info.azs for i in rig.group(az)["Instances"]}
    assert {spare, replacement} <= ids


def test_no_membership_at_all_means_no_cleanup(rig: Rig) -> None:
    response = rig.tick(rig.at(30))
    assert any("membership_unavailable" in a["action"] for a in response["actions"])
    assert sum(len(rig.group(az)["Instances"]) for az in rig.info.azs) == 6


def _crash_after(rig: Rig, kind: type, nth: int = 1) -> None:
    seen = {"n": 0}

    def after(action: object) -> None:
        if isinstance(action, kind):
            seen["n"] += 1
            if seen["n"] == nth:
                raise Crash(f"crash after {action}")

    rig.deps.after_action = after


def test_crash_after_the_intent_is_recorded_is_completed_once(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 2)

    def after(action: object) -> None:  # crash right after the raise intent is written
        if isinstance(action, WriteLedger) and "intent" in action.why:
            raise Crash("crash after the intent")

    rig.deps.after_action = after
    with pytest.raises(Crash):
        rig.failure("us-east-1a", rig.at(0))
    assert rig.sizes()["b"][0] == 2  # intent recorded, nothing raised yet
    assert rig.deps.store.get("LOCK").get("holder") is None  # released on the way out
    rig.deps.after_action = None
    rig.tick(rig.at(0.5))
    rig.failure("us-east-1a", rig.at(1))
    sizes = rig.sizes()
    assert (sizes["b"][0], sizes["c"][0]) == (3, 3)  # raised exactly once
    assert all(d.state.value == "raised" for d in rig.ledger("us-east-1a").compensation.donors.values())


def test_crash_after_a_terminate_is_reconciled_without_a_second_decrement(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 2)
    rig.failure("us-east-1a", rig.at(0))
    rig.failure("us-east-1a", rig.at(0.5))
    rig.outage.recover(rig.info.worker_asgs["us-east-1a"])
    rig.wait_nodes(11)
    rig.report_membership(rig.at(3))
    rig.tick(rig.at(3))
    rig.report_membership(rig.at(14))
    rig.tick(rig.at(14))
    rig.finish_drains()
    _crash_after(rig, Terminate, nth=1)
    rig.report_membership(rig.at(15))
    with pytest.raises(Crash):
        rig.tick(rig.at(15))
    assert sorted(v[0] for v in rig.sizes().values()) == [2, 2, 3]  # one given back, one not yet
    rig.deps.after_action = None
    rig.report_membership(rig.at(16))
    rig.tick(rig.at(16))
    assert rig.sizes() == {"a": (2, 4, 2), "b": (2, 4, 2), "c": (2, 4, 2)}
    assert rig.ledger("us-east-1a").compensation is None


def test_refresh_run_holding_the_lock_defers_compensation_to_the_next_tick(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    lock = LeaseLock(rig.deps.store, clock=lambda: rig.at(0).timestamp())
    lease = lock.acquire("refresher:run-1", "refresh", 300)
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 1)
    response = rig.failure("us-east-1a", rig.at(1))
    assert any("lock_held" in a["action"] for a in response["actions"])
    assert rig.sizes()["b"][0] + rig.sizes()["c"][0] == 4  # nothing raised
    assert rig.ledger("us-east-1a").backoff.last_failure_at is not None  # the failure is not lost
    LeaseLock(rig.deps.store, clock=lambda: rig.at(2).timestamp()).release(lease)
    response = rig.tick(rig.at(2))  # no new failure event: the tick acts on the recorded one
    assert response["operation"] == "replenish"
    assert rig.sizes()["b"][0] + rig.sizes()["c"][0] == 5


def test_events_of_another_clusters_group_change_nothing(rig: Rig) -> None:
    foreign = create_foreign_asg(rig.world.session, rig.info, size=1)
    rig.report_membership(rig.at(0))
    before = rig.sizes()
    for successful in (False, True):
        response = rig.invoke(launch_event(foreign, successful=successful, time=rig.at(0)), rig.at(0))
        assert response["status"] == "noted"
        assert [a["action"] for a in response["actions"]] == [
            f"not_managed: {foreign} is not tagged for cluster {rig.info.name}"
        ]
    event = load_event("agent-drain-succeeded.json")
    event["detail"]["cluster"] = "foreign.k8s.local"
    assert rig.invoke(event, rig.at(0))["status"] == "noted"
    assert rig.sizes() == before
    assert rig.deps.store.get(f"COMP#{foreign}") is None


def test_malformed_event_is_rejected_not_raised(rig: Rig) -> None:
    event = load_event("autoscaling-launch-unsuccessful.json")
    del event["detail"]["AutoScalingGroupName"]
    response = rig.invoke(event, rig.at(0))
    assert response["status"] == "rejected" and "AutoScalingGroupName" in response["error"]


def test_dry_run_changes_nothing(rig: Rig) -> None:
    rig.deps.settings = rig.deps.settings.model_copy(update={"dry_run": True})
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 1)
    response = rig.failure("us-east-1a", rig.at(0))
    assert response["status"] == "dry_run"
    assert any(a["action"].startswith("set ") for a in response["actions"])
    assert rig.ledger("us-east-1a") is None
    assert rig.sizes()["b"][0] == 2


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [({"region": "eu-west-1"}, "foreign_region"), ({"account": "210987654321"}, "foreign_account")],
)
def test_another_regions_or_accounts_launch_failure_is_acknowledged_never_compensated(
    rig: Rig, envelope: dict[str, str], reason: str
) -> None:
    """The group name is one of the cluster's: only the envelope says the failure happened elsewhere."""
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 2)
    before = rig.sizes()
    raw = {
        **launch_event(
            rig.info.worker_asgs["us-east-1a"],
            successful=False,
            time=rig.at(0),
            availability_zone="us-east-1a",
            status_message="There is no Spot capacity available that matches your request.",
        ),
        **envelope,
    }

    response = rig.invoke(raw, rig.at(0))

    assert response["status"] == "acknowledged" and response["reason"] == reason
    assert rig.sizes() == before and rig.ledger("us-east-1a") is None
    # the same failure from the deployment's own account and region is compensated
    assert rig.failure("us-east-1a", rig.at(0.1))["status"] == "acted"


def test_a_lock_lost_right_after_it_was_taken_applies_nothing(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lease runs out between the acquisition and the first write (a stalled invocation) and a refresh run takes
    the lock: every write of the plan is fenced, so nothing of it is applied, and the lock stays with the run."""
    import lambdas.replenisher.handler as handler

    class Stolen(LeaseLock):
        def acquire(self, *args, **kwargs):  # type: ignore[no-untyped-def]  # passes the real signature through
            lease = super().acquire(*args, **kwargs)
            LeaseLock(self.table, clock=lambda: lease.expires_at + 1).acquire("refresher:run-1", "refresh", 1800)
            return lease

    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 2)
    before = {az: sizes[:2] for az, sizes in rig.sizes().items()}
    monkeypatch.setattr(handler, "LeaseLock", Stolen)
    response = rig.failure("us-east-1a", rig.at(0))
    assert response["status"] == "lock_lost", response
    assert {az: sizes[:2] for az, sizes in rig.sizes().items()} == before  # nothing raised
    assert all(not item["sk"].startswith("CMD#giveback-") for item in rig.deps.store.query_prefix("CMD#"))
    assert rig.deps.store.get("LOCK")["holder"] == "refresher:run-1"  # the loser released nothing of the winner's
    ledger = rig.ledger("us-east-1a")
    assert ledger is None or ledger.compensation is None  # no intent recorded
