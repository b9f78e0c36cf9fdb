"""The refresher on the local world: its handler in this process, the agent as its own process, moto's Auto Scaling,
the real kube-apiserver with the simulator, and the event pump playing EventBridge (scenarios/refreshing.py).

Timings are shortened (REFRESHER_ENV, AGENT_ENV); advancement comes from events (the tick is never pumped here,
except where a test says so).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
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
from scenarios.fleetchart import FleetRecorder
from scenarios.refreshing import ReadyGuard, RefreshHarness, ready_workers, wait_until
from scenarios.timeline import Timeline

pytestmark = pytest.mark.world


@contextlib.contextmanager
def harness(world: Any, info: Any, **kwargs: Any) -> Iterator[RefreshHarness]:
    h = RefreshHarness(world, info, **kwargs).start()
    try:
        yield h
    finally:
        h.stop()


def assert_capacity_restored(h: RefreshHarness, before: dict[str, dict[str, Any]]) -> None:
    """Invariant 4: desired capacity and MaxSize where they were, exactly that many instances, none outside."""
    after = h.groups()
    for name, group in before.items():
        assert after[name]["DesiredCapacity"] == group["DesiredCapacity"], name
        assert after[name]["MaxSize"] == group["MaxSize"], name
        assert len(after[name]["Instances"]) == group["DesiredCapacity"], name
    in_groups = {i["InstanceId"] for g in after.values() for i in g["Instances"]}
    assert h.running_instances() == in_groups, "an instance is running outside its group"


def node_of(world: Any, instance_id: str) -> dict[str, Any]:
    node = world.simulator.node_for_instance(instance_id)
    assert node is not None
    return node


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


def test_a_dry_run_changes_nothing(world: Any) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    with harness(world, info) as h:
        before = h.groups()
        items = h.store.table.scan()["Items"]
        response = h.refresh(all=True, dry_run=True)
        assert response["status"] == "dry_run"
        assert "NEEDS-UPDATE" in response["table"] and len(response["steps"]) == 2
        assert {r["group"] for r in response["groups"]} == set(info.all_asgs)
        assert all(a["result"] == "dry run: not done" for a in response["actions"])
        assert h.groups() == before
        assert h.store.table.scan()["Items"] == items  # no RUN#, no LOCK, no CMD#


@pytest.mark.parametrize(
    "payload,field",
    [
        ({"action": "refresh"}, "cluster"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_age": "soon"}, "max_age"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_age": "7d", "all": True}, "either max_age or all"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_surge": 0}, "max_surge"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "drain_timeout": "1s"}, "drain_timeout"),
        ({"action": "refresh", "cluster": "demo.k8s.local", "max_surge": 50}, "max_surge"),  # beyond the settings
        (
            {"action": "refresh", "cluster": "demo.k8s.local", "drain_timeout_policy": "terminate"},
            "drain_timeout_policy",
        ),
        ({"action": "refresh", "cluster": "demo.k8s.local", "selection": "all"}, "selection"),
        ({"action": "reboot", "cluster": "demo.k8s.local"}, "action"),
    ],
)
def test_an_invalid_manual_payload_is_rejected_and_changes_nothing(
    world: Any, payload: dict[str, Any], field: str
) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1, wait_ready=False)
    h = RefreshHarness(world, info)
    before = h.groups()
    response = h.invoke(payload)
    assert response["status"] == "rejected" and response["reason"] == "invalid_request"
    assert any(field in e for e in response["errors"]), response["errors"]
    assert h.groups() == before and list(h.store.query_prefix("RUN#")) == []
    h.invoker.close()


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [({"region": "eu-west-1"}, "foreign_region"), ({"account": "210987654321"}, "foreign_account")],
)
def test_another_regions_or_accounts_events_are_acknowledged_and_change_nothing(
    world: Any, envelope: dict[str, str], reason: str
) -> None:
    from localworld.eventbus import launch_event, scheduled_event

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1, wait_ready=False)
    h = RefreshHarness(world, info)
    before = h.groups()
    group = info.worker_asgs["us-east-1a"]
    now = datetime.now(UTC)
    for raw in (
        scheduled_event("node-manager-refresh-tick", time=now),
        launch_event(group, successful=True, time=now, instance_id="i-0123456789abcdef0"),
    ):
        response = h.invoke({**raw, **envelope})
        assert response["status"] == "acknowledged" and response["reason"] == reason, response
        # the same event from home is the refresher's to judge (not out of scope)
        assert h.invoke(raw).get("reason") != reason
    assert h.groups() == before and list(h.store.query_prefix("RUN#")) == []
    h.invoker.close()


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


def test_the_cli_runs_the_handler_locally_against_the_world(world: Any) -> None:
    import subprocess
    import sys

    from localworld.world import REPO_ROOT

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    env = world.env({"POWERTOOLS_SERVICE_NAME": "refresher"})
    before = RefreshHarness(world, info).groups()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli", "--local", *args],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    # No agent runs here, so no master is known Ready: the dry run still shows the plan, says the real run would be
    # refused and why, and exits 1 as the real run would.
    dry = cli("refresh", "--dry-run", "--all")
    assert dry.returncode == 1, dry.stderr
    assert "refusal:" in dry.stdout and "master" in dry.stdout
    assert (
        "status: dry_run" in dry.stdout
        and "NEEDS-UPDATE" in dry.stdout
        and info.worker_asgs["us-east-1a"] in dry.stdout
    )
    status = cli("status")
    assert status.returncode == 0 and "lock: free" in status.stdout and "ledger (COMP#): 0" in status.stdout
    bad = cli("refresh", "--max-age", "soon")
    assert bad.returncode == 1 and "invalid_request" in bad.stdout
    none = cli("cancel")
    assert none.returncode == 1 and "no active run" in none.stdout
    assert RefreshHarness(world, info).groups() == before


def test_a_finished_runs_record_draws_each_instance_and_the_groups_ready_nodes(world: Any, tmp_path: Any) -> None:
    """``node-manager status --run ID --chart FILE`` on a run the refresher carried out: the picture read back (its
    SVG ids) has the old instance's surge, drain and terminate, its spare's launch and Ready, and the group's Ready
    nodes going up by the spare and down by the old one; the scenarios' recorder, watching beside it, sees the same."""
    import xml.etree.ElementTree as ET

    from charts.runrecord import run_chart
    from cli.main import main

    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=1)
    worker_asg = info.worker_asgs["us-east-1a"]
    recorder = FleetRecorder(world, Timeline(out=io.StringIO(), progress=io.StringIO()), interval=0.1)
    recorder.start()  # what `python -m scenarios NAME --chart FILE` records beside a scenario
    with harness(world, info) as h:
        response = h.refresh(all=True, instance_groups=[worker_asg])
        run = h.wait_run(response["run"]["run_id"], 60)
    recorder.stop()
    assert run.status is RunStatus.SUCCEEDED, run.reason
    (step,) = run.steps
    assert list(step.entered) == ["surging", "draining", "terminating", "done"] and step.spare_ready_at is not None

    path, out, err = tmp_path / "run.svg", [], []
    argv = ["status", "--run", run.run_id, "--chart", str(path), "--cluster", info.name, "--function-name", "f"]
    assert main(argv, environ={}, invoker=h.invoke, out=out.append, err=err.append) == 0, err
    assert out[-1] == f"chart: {path} (2 instance rows, 1 groups)"
    ids = [e.get("id", "") for e in ET.parse(path).iter() if "|" in e.get("id", "")]
    phases = {
        iid: [i.split("|")[2] for i in ids if i.startswith(f"span|{iid}|")]
        for iid in (step.instance_id, step.surge_instance_id)
    }
    assert phases == {step.instance_id: ["surge", "drain", "terminate"], step.surge_instance_id: ["launch", "ready"]}
    assert [i for i in ids if i.startswith("pool|")] == ["pool|nodes-us-east-1a"]
    (pool,) = run_chart(run).pools
    assert [n for _, n in pool.points] == [1, 2, 1]  # the spare Ready, then the old instance terminated

    seen = recorder.chart("seen")  # the same run as the scenario recorder saw it: groups, nodes, the drain's CMD#
    rows = {r.instance_id: [s.phase.value for s in r.spans] for r in seen.rows}
    assert rows[step.instance_id][:2] == ["ready", "drain"] and "drained" in rows[step.instance_id], rows
    assert "ready" in rows[step.surge_instance_id], rows
    ready = {p.pool: [n for _, n in p.points] for p in seen.pools}
    assert ready["nodes-us-east-1a"] == [1, 2, 1], ready
