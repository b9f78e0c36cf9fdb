"""Detached instances never left running (rule 10 of lambdas.replenisher.decide): an instance detached for early
replacement that is still running past DETACHED_MAX_SECONDS (900 s by default) is terminated by the tick and
recorded in DETACH#; one the Spot reclaim took is recorded gone."""

from __future__ import annotations

from typing import Any

from core.detach import DetachState
from tests.integration.lambdas.replenisher.conftest import Rig


def _detach(rig: Rig, az: str, minutes: float) -> str:
    """What the interruption Lambda does on a Spot warning: DETACH# intent, DetachInstances without decrement,
    detached."""
    group = rig.group(az)
    iid = group["Instances"][0]["InstanceId"]
    store = rig.deps.store
    assert store.record_detach(iid, group["AutoScalingGroupName"], "spot-interruption:test", 86400, now=rig.at(minutes))
    rig.autoscaling.detach_instances(
        AutoScalingGroupName=group["AutoScalingGroupName"], InstanceIds=[iid], ShouldDecrementDesiredCapacity=False
    )
    store.mark_detached(iid, DetachState.DETACHED, now=rig.at(minutes))
    return iid


def _ec2_state(rig: Rig, iid: str) -> str:
    out: Any = rig.world.client("ec2").describe_instances(InstanceIds=[iid])
    return str(out["Reservations"][0]["Instances"][0]["State"]["Name"])


def test_a_detached_instance_still_running_past_its_deadline_is_terminated_and_recorded(rig: Rig) -> None:
    left_running = _detach(rig, "us-east-1b", 0)  # the reclaim never comes
    reclaimed = _detach(rig, "us-east-1c", 0)
    rig.world.client("ec2").terminate_instances(InstanceIds=[reclaimed])  # Spot took it, as announced
    rig.wait_nodes(3 + 6 + 1)  # the groups' replacements joined, and the node of the one left running

    rig.report_membership(rig.at(10))
    response = rig.tick(rig.at(10))  # within 900 s of the detach: left alone
    assert response["operation"] is None
    assert _ec2_state(rig, left_running) == "running"
    assert rig.deps.store.get_detach(left_running)["state"] == "detached"

    rig.report_membership(rig.at(16))
    response = rig.tick(rig.at(16))

    assert response["operation"] == "surplus-cleanup"
    results = [f"{a['action']}: {a['result']}" for a in response["actions"]]
    assert f"terminate detached {left_running}" in " ".join(results)
    assert _ec2_state(rig, left_running) in ("shutting-down", "terminated")
    assert rig.deps.store.get_detach(left_running)["state"] == "terminated"
    assert rig.deps.store.get_detach(reclaimed)["state"] == "gone"
    # the groups were not touched: their replacements stay
    assert rig.sizes()["b"] == (2, 4, 2) and rig.sizes()["c"] == (2, 4, 2)

    rig.report_membership(rig.at(18))
    response = rig.tick(rig.at(18))  # settled: nothing more
    assert not [a for a in response["actions"] if "detached" in a["action"]]


def test_a_detached_instance_attached_back_is_left_alone(rig: Rig) -> None:
    iid = _detach(rig, "us-east-1b", 0)
    name = rig.info.worker_asgs["us-east-1a"]
    rig.autoscaling.update_auto_scaling_group(AutoScalingGroupName=name, MaxSize=5)
    rig.autoscaling.attach_instances(AutoScalingGroupName=name, InstanceIds=[iid])  # someone took it back
    rig.report_membership(rig.at(16))
    response = rig.tick(rig.at(16))
    assert any("back in a group: left alone" in a["action"] for a in response["actions"])
    assert _ec2_state(rig, iid) == "running"
    assert rig.deps.store.get_detach(iid)["state"] == "detached"
