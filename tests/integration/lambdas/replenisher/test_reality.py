"""Reconcile with reality and bounded replay on the local world (moto made as strict as AWS by
localworld.aws_rules): a refused terminate is not counted as given back, a kOps reset of a donor is detected and not
fought, a forged ledger cannot scale a group past the settings' limits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.ledger import Compensation, Donor, DonorState, Ledger
from lambdas.replenisher.plan import WriteLedger
from tests.integration.lambdas.replenisher.conftest import Rig


def _compensate_a(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    rig.outage.fail(rig.info.worker_asgs["us-east-1a"])
    rig.lose("us-east-1a", 2)
    rig.failure("us-east-1a", rig.at(0))
    rig.failure("us-east-1a", rig.at(0.5))  # claims the donors' new instances
    assert {k: v[0] for k, v in rig.sizes().items()} == {"a": 2, "b": 3, "c": 3}


def _recover_a_and_start_give_back(rig: Rig, start: float) -> None:
    rig.outage.recover(rig.info.worker_asgs["us-east-1a"])
    rig.wait_nodes(3 + 2 + 3 + 3)
    rig.report_membership(rig.at(start))
    rig.tick(rig.at(start))  # healthy since
    rig.report_membership(rig.at(start + 11))
    assert rig.tick(rig.at(start + 11))["operation"] == "scale-back"  # hold passed: drains sent
    assert rig.finish_drains()


def _min_size(rig: Rig, az: str) -> int:
    return int(rig.group(az)["MinSize"])


def _results(response: dict[str, Any]) -> list[str]:
    return [f"{a['action']}: {a['result']}" for a in response["actions"]]


def test_a_terminate_refused_during_give_back_is_retried_never_counted_as_given_back(rig: Rig) -> None:
    _compensate_a(rig)
    _recover_a_and_start_give_back(rig, 3)
    b_name = rig.info.worker_asgs["us-east-1b"]
    claimed_b = rig.ledger("us-east-1a").compensation.donors[b_name].instance_ids
    assert len(claimed_b) == 1

    def person_raises_min_size(action: object) -> None:  # between the decision and the terminate
        if isinstance(action, WriteLedger) and "give-back progress" in action.why and _min_size(rig, "us-east-1b") == 2:
            rig.autoscaling.update_auto_scaling_group(AutoScalingGroupName=b_name, MinSize=3)

    rig.deps.after_action = person_raises_min_size
    rig.report_membership(rig.at(15))
    response = rig.tick(rig.at(15))
    rig.deps.after_action = None

    results = _results(response)
    refused = [r for r in results if "refused:" in r]
    assert len(refused) == 1 and claimed_b[0] in refused[0] and "desiredSize equals minSize (3)" in refused[0]
    assert any(r.endswith("retried next invocation") for r in results)  # nothing after the refusal applied
    comp = rig.ledger("us-east-1a").compensation
    assert comp is not None  # not cleared: the refused one is not counted as given back
    assert comp.give_back[claimed_b[0]].state.value == "terminating"
    assert comp.donors[b_name].returned == 0
    assert claimed_b[0] in {i["InstanceId"] for i in rig.group("us-east-1b")["Instances"]}

    for minute in (16, 17, 18):  # the next invocations: b's instance is kept (its MinSize needs it), c given back
        rig.report_membership(rig.at(minute))
        response = rig.tick(rig.at(minute))
        assert not [r for r in _results(response) if "refused:" in r]

    assert rig.ledger("us-east-1a").compensation is None
    assert rig.sizes() == {"a": (2, 4, 2), "b": (3, 4, 3), "c": (2, 4, 2)}
    assert _min_size(rig, "us-east-1b") == 3
    uncordon = rig.deps.store.get(f"CMD#giveback-uncordon-{claimed_b[0]}")
    assert uncordon is not None and uncordon["command"]["kind"] == "uncordon"  # drained for nothing: uncordoned


def test_kops_resetting_a_donor_mid_compensation_is_detected_not_fought_and_recovery_ends_at_its_own_sizes(
    rig: Rig,
) -> None:
    _compensate_a(rig)
    b_name = rig.info.worker_asgs["us-east-1b"]
    c_name = rig.info.worker_asgs["us-east-1c"]
    # kops update cluster with b's instance group at min 2 / max 2: MaxSize and desired reset under the raise
    rig.autoscaling.update_auto_scaling_group(AutoScalingGroupName=b_name, MinSize=2, MaxSize=2, DesiredCapacity=2)
    rig.report_membership(rig.at(1))
    response = rig.tick(rig.at(1))

    assert any("size_reset" in r and b_name in r for r in _results(response))
    comp = rig.ledger("us-east-1a").compensation
    assert comp.donors[b_name].raised_by == 0 and comp.donors[b_name].reset_at == rig.at(1)
    assert comp.donors[c_name].raised_by == 2  # the shortfall re-evaluated: c covers all of it
    assert rig.sizes()["b"] == (2, 2, 2) and rig.sizes()["c"] == (4, 4, 4)
    for minute in (1.5, 2, 2.5):  # later invocations: the reset is not fought
        rig.report_membership(rig.at(minute))
        rig.tick(rig.at(minute))
        assert rig.sizes()["b"] == (2, 2, 2)

    _recover_a_and_start_give_back(rig, 3)
    for minute in (15, 16, 17):
        rig.report_membership(rig.at(minute))
        rig.tick(rig.at(minute))

    assert rig.ledger("us-east-1a").compensation is None
    assert rig.sizes() == {"a": (2, 4, 2), "b": (2, 2, 2), "c": (2, 4, 2)}  # b at kOps's sizes, c at its own
    for az in ("b", "c"):
        assert rig.sizes()[az][0] >= _min_size(rig, f"us-east-1{az}")


def test_a_forged_ledger_with_absurd_targets_is_clamped_and_logged(rig: Rig) -> None:
    rig.report_membership(rig.at(0))
    a_name = rig.info.worker_asgs["us-east-1a"]
    b_name = rig.info.worker_asgs["us-east-1b"]
    forged = Ledger(
        asg_name=a_name,
        compensation=Compensation(
            started_at=rig.at(0),
            donors={
                b_name: Donor(
                    asg_name=b_name,
                    state=DonorState.INTENDED,  # "a crashed invocation's intent": replayed by the next one
                    raised_by=100_000,
                    desired_before=2,
                    max_before=50_000,
                    desired_target=100_000,
                    max_target=200_000,
                    raised_at=rig.at(0) - timedelta(minutes=1),
                )
            },
        ),
    )
    rig.deps.store.put(f"COMP#{a_name}", forged.model_copy(update={"version": 1}).model_dump(mode="json"))

    response = rig.tick(rig.at(0.1))

    clamped = [r for r in _results(response) if "clamped" in r]
    assert len(clamped) == 1 and "above the limit 8" in clamped[0], _results(response)
    desired, max_size, _ = rig.sizes()["b"]
    assert (desired, max_size) == (8, 8)  # DONOR_MAX_SIZE_FACTOR 2 x b's real MaxSize 4, not 100000
