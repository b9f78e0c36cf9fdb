"""Compensation on the local world: an AZ that cannot launch is covered by its siblings, once."""

from __future__ import annotations

from tests.integration.lambdas.replenisher.conftest import Rig


def test_shortfall_covered_once_despite_20_duplicate_failures(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 2)
    assert rig.sizes()["a"] == (2, 4, 0)
    for k in range(20):
        rig.failure("us-east-1a", rig.at(0.1 * k))
    sizes = rig.sizes()
    assert sizes["a"] == (2, 4, 0)
    assert sizes["b"][0] + sizes["c"][0] == 2 + 2 + 2, sizes  # shortfall of 2 spread over b and c, once
    assert sizes["b"][0] == 3 and sizes["c"][0] == 3
    ledger = rig.ledger("us-east-1a")
    assert ledger is not None and ledger.compensation is not None
    assert {d: v.raised_by for d, v in ledger.compensation.donors.items()} == {
        rig.info.worker_asgs["us-east-1b"]: 1,
        rig.info.worker_asgs["us-east-1c"]: 1,
    }
    claimed = [i for d in ledger.compensation.donors.values() for i in d.instance_ids]
    assert len(claimed) == 2
    acted = [r for r in rig.responses if r["status"] == "acted" and r["operation"] == "replenish"]
    assert len(acted) == 1


def _compensate_a(rig: Rig, lost: int = 2) -> None:
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", lost)
    rig.failure("us-east-1a", rig.at(0))
    rig.failure("us-east-1a", rig.at(0.5))  # the next retry: claims the donors' new instances


def _recover_a(rig: Rig) -> None:
    rig.outage.recover(rig.info.worker_asgs["us-east-1a"])
    rig.wait_nodes(3 + 8)


def test_recovery_gives_back_exactly_the_compensating_instances(rig: Rig) -> None:
    _compensate_a(rig)
    ledger = rig.ledger("us-east-1a")
    claimed = {i for d in ledger.compensation.donors.values() for i in d.instance_ids}
    _recover_a(rig)
    rig.report_membership(rig.at(3))
    rig.tick(rig.at(3))  # healthy since 3 min
    assert rig.ledger("us-east-1a").compensation.healthy_since == rig.at(3)
    rig.report_membership(rig.at(12))
    assert rig.tick(rig.at(12))["status"] in ("noted", "acted")  # 9 min < hold: nothing given back
    assert not rig.ledger("us-east-1a").compensation.returning
    rig.report_membership(rig.at(13.5))
    response = rig.tick(rig.at(13.5))
    assert response["operation"] == "scale-back"
    commands = {item["instance_id"] for item in rig.deps.store.query_prefix("CMD#giveback-")}
    assert commands == claimed  # drained by id: exactly the compensating ones
    assert rig.sizes()["b"] == (3, 4, 3)  # nothing terminated before the drain ended
    rig.finish_drains()
    rig.report_membership(rig.at(14))
    rig.tick(rig.at(14))
    sizes = rig.sizes()
    assert sizes == {"a": (2, 4, 2), "b": (2, 4, 2), "c": (2, 4, 2)}
    remaining = {i["InstanceId"] for az in rig.info.azs for i in rig.group(az)["Instances"]}
    assert not claimed & remaining
    assert rig.ledger("us-east-1a").compensation is None  # cleared
    assert rig.ledger("us-east-1a").backoff.last_failure_at is not None  # backoff history kept
    lock = rig.deps.store.get("LOCK")
    assert lock.get("holder") is None  # released


def test_two_azs_failing_at_once_are_covered_by_the_third(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    for az in ("us-east-1a", "us-east-1b"):
        rig.outage.fail(rig.info.worker_asgs[az])
        rig.lose(az, 1)
    rig.failure("us-east-1a", rig.at(0))
    rig.failure("us-east-1b", rig.at(0.1))
    assert rig.sizes()["c"] == (4, 4, 4)
    assert rig.ledger("us-east-1a").compensation.owed == 1
    assert rig.ledger("us-east-1b").compensation.owed == 1


def test_donor_at_its_max_size_is_raised_within_the_cap_and_restored(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    for az in ("us-east-1b", "us-east-1c"):
        rig.autoscaling.update_auto_scaling_group(AutoScalingGroupName=rig.info.worker_asgs[az], MaxSize=2)
    _compensate_a(rig)
    sizes = rig.sizes()
    assert sizes["b"] == (3, 3, 3) and sizes["c"] == (3, 3, 3)  # MaxSize raised (cap 2 x 2 = 4)
    donor = rig.ledger("us-east-1a").compensation.donors[rig.info.worker_asgs["us-east-1b"]]
    assert (donor.max_before, donor.max_target) == (2, 3)
    _recover_a(rig)
    # the MaxSize restores asked at minute 15 are counted once the next tick reads them back (minute 16)
    for minute, drains in ((3, False), (14, True), (15, False), (16, False)):
        rig.report_membership(rig.at(minute))
        rig.tick(rig.at(minute))
        if drains:
            rig.finish_drains()
    assert rig.sizes() == {"a": (2, 4, 2), "b": (2, 2, 2), "c": (2, 2, 2)}
    assert rig.ledger("us-east-1a").compensation is None


def test_no_healthy_sibling_does_nothing_and_says_why(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    for az in ("us-east-1b", "us-east-1c"):  # siblings failed recently: in backoff
        rig.failure(az, rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 1)
    before = rig.sizes()
    response = rig.failure("us-east-1a", rig.at(1))
    assert rig.sizes() == before
    assert any("no_healthy_sibling" in a["action"] for a in response["actions"])
    assert rig.ledger("us-east-1a").compensation is None


def test_flapping_group_is_not_given_back_within_the_hold(rig: Rig) -> None:
    _compensate_a(rig)
    _recover_a(rig)
    rig.report_membership(rig.at(8))
    rig.tick(rig.at(8))  # healthy since 8 min
    assert rig.ledger("us-east-1a").compensation.healthy_since is not None
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])  # 2 minutes later it fails again
    rig.lose("us-east-1a", 1)
    rig.failure("us-east-1a", rig.at(10))
    ledger = rig.ledger("us-east-1a")
    assert ledger.compensation.healthy_since is None and not ledger.compensation.returning
    assert ledger.backoff.window_seconds == 600  # failed again after its 5 min window: doubled
    rig.report_membership(rig.at(19))
    rig.tick(rig.at(19))
    assert not rig.ledger("us-east-1a").compensation.returning
    assert not list(rig.deps.store.query_prefix("CMD#giveback-"))


def test_interrupted_compensating_instance_is_replaced_and_the_replacement_given_back(rig: Rig) -> None:
    _compensate_a(rig)
    donor_name = rig.info.worker_asgs["us-east-1b"]
    donor = rig.ledger("us-east-1a").compensation.donors[donor_name]
    (victim,) = donor.instance_ids
    # the interruption Lambda's early replacement: detached without decrement, then reclaimed by EC2
    rig.deps.store.record_detach(victim, donor_name, "spot-interruption:x", 3600)
    rig.autoscaling.detach_instances(
        InstanceIds=[victim], AutoScalingGroupName=donor_name, ShouldDecrementDesiredCapacity=False
    )
    rig.world.client("ec2").terminate_instances(InstanceIds=[victim])
    rig.tick(rig.at(1))
    donor = rig.ledger("us-east-1a").compensation.donors[donor_name]
    (replacement,) = donor.instance_ids
    assert replacement != victim
    assert any(victim in n for n in rig.ledger("us-east-1a").compensation.notes)
    _recover_a(rig)
    for minute, drains in ((3, False), (14, True), (15, False)):
        rig.report_membership(rig.at(minute))
        rig.tick(rig.at(minute))
        if drains:
            rig.finish_drains()
    assert rig.sizes()["b"] == (2, 4, 2)
    assert replacement not in {i["InstanceId"] for i in rig.group("us-east-1b")["Instances"]}
