"""The refresher on the local world: its handler in this process, the agent as its own process, moto's Auto Scaling,
the real kube-apiserver with the simulator, and the event pump playing EventBridge (scenarios/refreshing.py); what an
operator drives (dry run, refusals, the CLI, the run's chart): ``test_refresher_operator.py``.

Timings are shortened (REFRESHER_ENV, AGENT_ENV); advancement comes from events (the tick is never pumped here,
except where a test says so).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools import Metrics

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import surge_capacity, surge_instance_ids
from core.runs import RunStatus, StepState
from lambdas.refresher.handler import Deps
from localworld.faults import CapacityOutage
from localworld.spot_market import set_market
from localworld.workloads import block_with_pdb, deploy_pods_on_node
from scenarios.refreshing import ReadyGuard, ready_workers, wait_until
from tests.integration.lambdas.refresh_helpers import assert_capacity_restored, harness, node_of

pytestmark = pytest.mark.world


def test_full_refresh_masters_then_workers_never_lowers_ready_workers(world: Any) -> None:
    info = world.setup_cluster()  # 3 masters + 3 AZs x 3 workers
    with harness(world, info) as h:
        before = h.groups()
        old = {i["InstanceId"] for g in before.values() for i in g["Instances"]}
        guard = ReadyGuard(world)
        guard.start()
        response = h.refresh(all=True)
        assert response["status"] == "started", response
        run = h.wait_run(response["run"]["run_id"], 150)
        guard.stop()
        assert run.status is RunStatus.SUCCEEDED, run.reason
        assert [s.state for s in run.steps] == [StepState.DONE] * 12
        assert [s.role for s in run.steps[:3]] == ["control-plane"] * 3  # masters first
        for group in {s.group for s in run.steps if s.role == "node"}:  # a drained step hands its surge unit on
            steps = [s for s in run.steps if s.group == group]
            assert len(steps) < 2 or any(s.handed_over_to is not None for s in steps), (group, steps)
        assert all(s.handed_over_to is None for s in run.steps[:3])  # masters never
        finished = [s.finished_at for s in run.steps]
        assert finished == sorted(finished)  # one after the other, masters before workers
        assert guard.minimum >= guard.start_count == 9, f"Ready workers fell to {guard.minimum}"
        assert_capacity_restored(h, before)
        assert not old & h.running_instances(), "an old instance survived"
        assert (LeaseLock(h.store).current() or {}).get("holder") is None  # lock released
        # advancement came from events: drain results, the agent's "Node Ready" and launches reached the function
        assert h.bus.events(source="node-manager.agent") and h.bus.events(source="aws.autoscaling")
        assert h.bus.events(detail_type="Node Ready")


def test_pdb_blocking_a_drain_pauses_cleanly_under_pause(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=2)
    worker_asg = info.worker_asgs["us-east-1a"]
    with harness(world, info) as h:
        before = h.groups()
        old = [i["InstanceId"] for i in before[worker_asg]["Instances"]]
        target = node_of(world, old[0])["metadata"]["name"]
        block_with_pdb(world.api, "bench", deploy_pods_on_node(world.api, target, 2, namespace="bench"))
        response = h.refresh(all=True, instance_groups=["nodes-us-east-1a"], drain_timeout="10s")
        run = h.wait_run(response["run"]["run_id"], 60)
        assert run.status is RunStatus.PAUSED
        assert "timed_out" in run.reason
        blocked = next(s for s in run.steps if s.instance_id == old[0])
        assert blocked.state is StepState.UNDONE and blocked.uncordon_command_id
        wait_until(lambda: not node_of(world, old[0])["spec"].get("unschedulable"), 15, "the node uncordoned")
        assert_capacity_restored(h, before)
        assert old[0] in h.running_instances()
        assert (LeaseLock(h.store).current() or {}).get("holder") is None


def test_pdb_blocking_a_drain_proceeds_under_terminate(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    with harness(world, info, refresher_env={"REFRESH_REQUEST_ALLOW_TERMINATE": "true"}) as h:
        before = h.groups()
        old = before[worker_asg]["Instances"][0]["InstanceId"]
        target = node_of(world, old)["metadata"]["name"]
        block_with_pdb(world.api, "bench", deploy_pods_on_node(world.api, target, 1, namespace="bench"))
        response = h.refresh(
            all=True, instance_groups=[worker_asg], drain_timeout="10s", drain_timeout_policy="terminate"
        )
        run = h.wait_run(response["run"]["run_id"], 60)
        assert run.status is RunStatus.SUCCEEDED, run.reason
        assert run.steps[0].drain_status == "timed_out" and run.steps[0].state is StepState.DONE
        assert old not in h.running_instances()
        assert_capacity_restored(h, before)


def test_a_master_not_ready_refuses_the_start_and_says_why(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    with harness(world, info) as h:
        master = h.groups()[info.master_asgs["us-east-1a"]]["Instances"][0]["InstanceId"]
        name = node_of(world, master)["metadata"]["name"]
        world.simulator.stop()  # no kubelet: the NotReady condition stays as written
        body = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "KubeletNotReady",
                        "message": "test",
                        "lastHeartbeatTime": _now(),
                        "lastTransitionTime": _now(),
                    }
                ]
            }
        }
        world.core.patch_node_status(name, body)
        wait_until(
            lambda: (r := h.store.get_node(master, 600)) is not None and not r.ready,
            15,
            "the agent to report the master NotReady",
        )
        before = h.groups()
        response = h.refresh(all=True)
        assert response["status"] == "refused"
        assert "masters not all Ready" in response["reason"] and master in response["reason"]
        assert h.runs.list() == [] and h.groups() == before


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Crash(Exception):
    """A simulated crash of the invocation (the process dies right there)."""


def crash_once(method: str, after: bool, state: dict[str, bool]) -> Any:
    """A ``deps_hook`` that makes the first call of the AWS adapter's ``<method>`` crash, before or after it acted
    (``state["armed"]`` turns False when it did)."""

    def hook(deps: Deps) -> Deps:
        adapter = deps.aws.queue if method == "send_command" else deps.aws.autoscaling
        real = getattr(adapter, method)

        def faulty(*args: Any, **kwargs: Any) -> Any:
            if state["armed"]:
                state["armed"] = False
                if after:
                    real(*args, **kwargs)
                raise Crash(f"crash {'after' if after else 'before'} {method}")
            return real(*args, **kwargs)

        setattr(adapter, method, faulty)
        return deps

    return hook


@pytest.mark.parametrize(
    "method,after",
    [
        ("set_capacity", True),  # after the surge was asked for, before the drain
        ("send_command", False),  # the drain recorded as intent, the command never sent
        ("terminate_in_group", True),  # after the terminate, before the state write
    ],
)
def test_a_crash_at_a_step_resumes_with_no_leaked_instance(world: Any, method: str, after: bool) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    state = {"armed": True}
    with harness(
        world, info, deps_hook=crash_once(method, after, state), refresher_env={"REFRESH_EFFECT_GRACE_SECONDS": "1"}
    ) as h:
        before = h.groups()
        old = before[worker_asg]["Instances"][0]["InstanceId"]
        with contextlib.suppress(Crash):  # the crash may hit this invocation or one an event started
            h.refresh(all=True, instance_groups=[worker_asg])
        wait_until(lambda: not state["armed"], 20, f"the crash in {method}")
        run_id = h.runs.list(1)[0].run_id
        # the tick (the safety net) finds the intent and completes it once the grace period passed
        run = wait_until(
            lambda: h.invoke({"trigger": "tick"}) and not h.run(run_id).status.active and h.run(run_id),
            40,
            "the run to finish after the crash",
            interval=0.5,
        )
        assert run.status is RunStatus.SUCCEEDED, run.reason
        assert old not in h.running_instances()
        assert_capacity_restored(h, before)


def test_a_launch_failure_during_surge_waits_without_removing_capacity(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=2)
    worker_asg = info.worker_asgs["us-east-1a"]
    with harness(world, info) as h:
        outage = CapacityOutage(h.bus)
        outage.fail(worker_asg)
        before = h.groups()
        response = h.refresh(all=True, instance_groups=[worker_asg])
        run_id = response["run"]["run_id"]
        run = h.run(run_id)
        assert run.status is RunStatus.RUNNING and "to launch a spare" in run.waiting
        assert h.groups()[worker_asg]["DesiredCapacity"] == before[worker_asg]["DesiredCapacity"] + 1
        assert ready_workers(world) == 2
        assert list(h.store.query_prefix("CMD#")) == []  # nothing drained
        outage.recover(worker_asg)
        run = h.wait_run(run_id, 60)
        assert run.status is RunStatus.SUCCEEDED, run.reason
        assert_capacity_restored(h, before)


def test_a_spot_interruption_of_the_spare_mid_run(world: Any) -> None:
    from core.settings import InterruptionSettings
    from lambdas.interruption.handler import Deps as InterruptionDeps
    from lambdas.interruption.handler import handle as interruption_handle
    from scenarios.spot import spot_warning

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    with harness(world, info) as h:
        before = h.groups()
        old = before[worker_asg]["Instances"][0]["InstanceId"]
        target = node_of(world, old)["metadata"]["name"]
        pdb = block_with_pdb(world.api, "bench", deploy_pods_on_node(world.api, target, 1, namespace="bench"))
        guard = ReadyGuard(world)
        guard.start()
        response = h.refresh(all=True, instance_groups=[worker_asg], drain_timeout="60s")
        run_id = response["run"]["run_id"]
        run = h.wait_run(run_id, 20, lambda r: r.steps[0].state is StepState.DRAINING)
        spare = run.steps[0].surge_instance_id
        assert spare and spare in surge_instance_ids(h.store)
        # Spot interrupts the spare (a Spot Instance: EC2 warns of no other kind, and the Lambda checks it with EC2)
        # the interruption Lambda drains it and detaches it; its ASG launches another
        set_market([spare], region=world.region)  # moto runs in this process (ThreadedMotoServer)
        settings = InterruptionSettings.from_env(info.env())
        ideps = InterruptionDeps.from_clients(
            settings,
            dynamodb=world.resource("dynamodb"),
            autoscaling=world.client("autoscaling"),
            ec2=world.client("ec2"),
            sqs=world.client("sqs"),
            dynamodb_client=world.client("dynamodb"),
            metrics=Metrics(namespace="NodeManager", service="interruption"),
        )
        assert interruption_handle(spot_warning(spare, world.region, datetime.now(UTC)), ideps)["status"] == "acted"
        wait_until(
            lambda: spare not in {i["InstanceId"] for i in h.groups()[worker_asg]["Instances"]},
            10,
            "the spare detached",
        )
        world.rest.delete(f"/apis/policy/v1beta1/namespaces/bench/poddisruptionbudgets/{pdb}")
        run = h.wait_run(run_id, 60)
        guard.stop()
        assert run.status is RunStatus.SUCCEEDED, run.reason
        assert guard.minimum >= guard.start_count, f"Ready workers fell to {guard.minimum}"
        world.client("ec2").terminate_instances(InstanceIds=[spare])  # Spot reclaims it
        assert_capacity_restored(h, before)


def test_the_surge_is_visible_to_the_replenisher_and_the_lock_free_while_a_run_waits(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    with harness(world, info) as h:
        old = h.groups()[worker_asg]["Instances"][0]["InstanceId"]
        target = node_of(world, old)["metadata"]["name"]
        pdb = block_with_pdb(world.api, "bench", deploy_pods_on_node(world.api, target, 1, namespace="bench"))
        response = h.refresh(all=True, instance_groups=[worker_asg], drain_timeout="60s")
        run_id = response["run"]["run_id"]
        run = h.wait_run(run_id, 20, lambda r: r.steps[0].state is StepState.DRAINING)
        # the run holds the lock only during a pass (DESIGN.md): while it waits for the drain, the lock is free
        wait_until(lambda: (LeaseLock(h.store).current() or {}).get("holder") is None, 10, "the pass to end")
        assert surge_capacity(h.store) == {worker_asg: 1}
        assert surge_instance_ids(h.store) == {run.steps[0].surge_instance_id}
        replenisher_acted = _replenisher_tick(world, info)
        assert h.groups()[worker_asg]["DesiredCapacity"] == 2, "the run's surge was judged surplus"
        assert replenisher_acted in (None, False)
        world.rest.delete(f"/apis/policy/v1beta1/namespaces/bench/poddisruptionbudgets/{pdb}")
        assert h.wait_run(run_id, 60).status is RunStatus.SUCCEEDED


def _replenisher_tick(world: Any, info: Any) -> bool | None:
    """Deliver a tick to the replenisher's handler if it exists (issue 3); True if it changed something."""
    try:
        from core.settings import ReplenisherSettings
        from lambdas.replenisher import handler as replenisher
    except ImportError:
        return None
    from localworld.eventbus import scheduled_event

    deps = replenisher.Deps.from_clients(
        ReplenisherSettings.from_env(info.env()),
        dynamodb=world.resource("dynamodb"),
        autoscaling=world.client("autoscaling"),
        ec2=world.client("ec2"),
        sqs=world.client("sqs"),
        metrics=Metrics(namespace="NodeManager", service="replenisher"),
    )
    out = replenisher.handle(scheduled_event("tick", time=datetime.now(UTC)), deps)
    return out.get("status") == "acted"


def test_instances_on_the_current_launch_template_version_are_skipped(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a", "us-east-1b"), nodes_per_az=1)
    stale_asg = info.worker_asgs["us-east-1a"]
    ec2 = world.client("ec2")
    # a new version of one group's template: that group launches version 2 ($Latest), its instances run version 1
    ec2.create_launch_template_version(
        LaunchTemplateName=info.launch_templates[stale_asg],
        SourceVersion="1",
        LaunchTemplateData={"InstanceType": "m5a.large"},
    )
    with harness(world, info) as h:
        before = h.groups()
        response = h.refresh(max_age="52w")  # nothing is that old: only the template decides
        rows = {r["group"]: r["needs_update"] for r in response["groups"]}
        assert rows[stale_asg] == 1 and sum(rows.values()) == 1, rows
        assert [s["needs_update"] for s in response["steps"]] == ["launch_template"]
        run = h.wait_run(response["run"]["run_id"], 60)
        assert run.status is RunStatus.SUCCEEDED
        untouched = info.worker_asgs["us-east-1b"]
        assert h.groups()[untouched]["Instances"] == before[untouched]["Instances"]
        assert_capacity_restored(h, before)


def test_cancel_gives_the_surge_back_and_stops(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    with harness(world, info) as h:
        outage = CapacityOutage(h.bus)
        outage.fail(worker_asg)  # the surge cannot launch: the step stays surging
        before = h.groups()
        response = h.refresh(all=True, instance_groups=[worker_asg])
        run_id = response["run"]["run_id"]
        out = h.invoke({"action": "cancel", "cluster": info.name})
        assert out["status"] == "cancel_requested"
        run = h.wait_run(run_id, 20)
        assert run.status is RunStatus.CANCELLED and run.steps[0].state is StepState.UNDONE
        outage.recover(worker_asg)
        assert_capacity_restored(h, before)
        status = h.invoke({"action": "status", "cluster": info.name})
        assert status["runs"][0]["status"] == "cancelled"
        assert (status["lock"] or {}).get("holder") is None
