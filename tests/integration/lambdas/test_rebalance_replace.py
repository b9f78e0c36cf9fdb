"""REBALANCE_POLICY=replace on the local world: a rebalance recommendation for a Spot worker goes through the
interruption Lambda's handler (this process, the moto server), which cordons the node and starts a one-instance
replacement run; the refresher (``scenarios.refreshing``: its handler, the agent as its own process, the event pump)
launches the spare, drains the at-risk node only once the spare is Ready, and terminates it with decrement.

Run under the shared lock: ``flock /tmp/anm-world.lock python -m pytest <this file>``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics

from adapters.dynamo.lock import LeaseLock
from core.runs import REBALANCE_TRIGGER, RunStatus, StepState
from core.settings import InterruptionSettings
from lambdas.interruption.handler import Deps, handle
from localworld.aws import aws_env
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext
from localworld.workloads import block_with_pdb, deploy_pods_on_node
from localworld.world import LocalWorld
from scenarios.refreshing import ReadyGuard, RefreshHarness, wait_until
from tests.integration.lambdas.refresh_helpers import assert_capacity_restored, node_of

pytestmark = [
    pytest.mark.world,
    # handle() runs outside Lambda: Powertools idempotency cannot read the remaining time of a context it lacks
    pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time left"),
]

EVENTS = Path(__file__).resolve().parents[2] / "events"
SPOT_DEADLINE = 15


@pytest.fixture
def lambda_env(world: LocalWorld, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    Metrics().clear_metrics()
    for key, value in {
        **aws_env(world.moto.endpoint_url, world.region),
        "POWERTOOLS_SERVICE_NAME": "interruption",
        "POWERTOOLS_METRICS_NAMESPACE": "NodeManagerTest",
    }.items():
        monkeypatch.setenv(key, value)
    yield
    Metrics().clear_metrics()


def deliver(info: Any, fixture: str, instance_id: str, **settings: str) -> dict[str, Any]:
    """EventBridge delivering the event of record ``fixture`` for ``instance_id``, stamped now, to the interruption
    Lambda with ``REBALANCE_POLICY=replace`` (and no early replacement unless ``settings`` say so)."""
    raw = json.loads((EVENTS / fixture).read_text())
    raw["id"] = str(uuid.uuid4())
    raw["time"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = raw["detail"]["instance-id"]
    raw["detail"]["instance-id"] = instance_id
    raw["resources"] = [r.replace(old, instance_id) for r in raw["resources"]]
    env = {**info.env(), "REBALANCE_POLICY": "replace", "EARLY_REPLACEMENT": "false", **settings}
    deps = Deps.from_session(InterruptionSettings.from_env(env), boto3.session.Session())
    deps.register_context(LocalLambdaContext(30, INTERRUPTION_FUNCTION))
    return handle(raw, deps)


def recommend(info: Any, instance_id: str, **settings: str) -> dict[str, Any]:
    return deliver(info, "rebalance-recommendation.json", instance_id, **settings)


def launch_time(world: LocalWorld, instance_id: str) -> datetime:
    out = world.client("ec2").describe_instances(InstanceIds=[instance_id])
    return out["Reservations"][0]["Instances"][0]["LaunchTime"]


def test_a_recommendation_launches_the_replacement_before_the_drain_then_terminates_the_node(
    world: LocalWorld, lambda_env: None
) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=2)
    worker_asg = info.worker_asgs["us-east-1a"]
    h = RefreshHarness(world, info).start()
    try:
        before = h.groups()
        at_risk = before[worker_asg]["Instances"][0]["InstanceId"]
        node_name = node_of(world, at_risk)["metadata"]["name"]
        guard = ReadyGuard(world)
        guard.start()

        response = recommend(info, at_risk)
        assert response["status"] == "acted", response
        results = [a["result"] for a in response["actions"]]
        assert results[0].startswith("started run "), results
        run_id = results[0].removeprefix("started run ")
        run = h.run(run_id)
        assert run.options.trigger == REBALANCE_TRIGGER and [s.instance_id for s in run.steps] == [at_risk]
        wait_until(lambda: node_of(world, at_risk)["spec"].get("unschedulable"), 15, "the rebalance cordon")

        # no tick: the rebalance cordon's result wakes the run (then launches and drain results move it on)
        run = h.wait_run(run_id, 120)
        guard.stop()

        assert run.status is RunStatus.SUCCEEDED, run.reason
        (step,) = run.steps
        assert step.state is StepState.DONE and step.drain_status == "succeeded"
        spare = step.surge_instance_id
        assert spare is not None and spare != at_risk
        # the replacement first: the spare was launched, and Ready (the refresher's rule), before the drain was asked
        drain = h.store.get_command(step.command_id or "")
        assert drain is not None and drain["command"]["reason"].startswith("rebalance-replace ")
        asked = datetime.fromisoformat(drain["created_at"])
        assert launch_time(world, spare) < asked
        ready = next(c for c in node_of(world, spare)["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True" and datetime.fromisoformat(ready["lastTransitionTime"]) <= asked
        assert node_of(world, spare)["metadata"]["name"] != node_name
        # never below the Ready workers it started with; the at-risk node gone; capacity where it was
        assert guard.minimum >= guard.start_count == 2, f"Ready workers fell to {guard.minimum}"
        assert at_risk not in h.running_instances()
        assert spare in {i["InstanceId"] for i in h.groups()[worker_asg]["Instances"]}
        assert_capacity_restored(h, before)
        assert (LeaseLock(h.store).current() or {}).get("holder") is None
        woken = [
            e
            for e in h.bus.events(source="node-manager.agent")
            if e["detail"].get("command_id", "").startswith("rebal")
        ]
        assert woken and woken[0]["detail-type"] == "Node Cordon Succeeded"

        # a recommendation while another run is active only cordons (the fallback), with the reason. The pump stops
        # first: a late event of the finished run (the agent's "Node Ready" for the spare) would invoke the refresher,
        # which would finish the planted run (all its steps are done) before the recommendation reads it
        h.bus.stop()
        assert h.invoker.settle(10), "a refresher invocation still running"
        other = next(i["InstanceId"] for i in h.groups()[worker_asg]["Instances"] if i["InstanceId"] != spare)
        refresh = run.options.model_copy(update={"trigger": "schedule"})  # a scheduled refresh is active
        h.runs.create(
            run.model_copy(
                update={"run_id": "29991231T000000Z-ffffff", "status": RunStatus.RUNNING, "options": refresh}
            )
        )
        # the first recommendation's cordon is still in effect: one of two workers, at the cap (20 %, at least one
        # node), so the fallback is capped as the cordon policy's is (rule 5d) and nothing is recorded
        capped = recommend(info, other)
        assert "run_active" in capped["actions"][0]["action"], capped
        assert [a["result"] for a in capped["actions"][1:]] == ["acknowledged"], capped
        assert "rebalance_capped" in capped["actions"][1]["action"], capped
        # with the cap lifted, the fallback cordon is recorded
        refused = recommend(info, other, REBALANCE_MAX_CORDONED_PERCENT="100")
        assert refused["actions"][0]["result"] == "skipped", refused
        assert "run_active" in refused["actions"][0]["action"]
        assert refused["actions"][1]["result"] == "recorded"  # the cordon, the fallback
    finally:
        h.stop()


@pytest.mark.parametrize(("pdb_policy", "drain_status"), [("delete", "succeeded"), ("honor", "timed_out")])
def test_a_spot_warning_during_the_replacement_tightens_its_drain_and_the_node_is_still_replaced(
    world: LocalWorld, lambda_env: None, pdb_policy: str, drain_status: str
) -> None:
    info = world.setup_cluster(azs=("us-east-1a",), nodes_per_az=2)
    worker_asg = info.worker_asgs["us-east-1a"]
    h = RefreshHarness(world, info, agent_env={"DRAIN_PDB_DEADLINE_POLICY": pdb_policy}).start()
    try:
        before = h.groups()
        at_risk = before[worker_asg]["Instances"][0]["InstanceId"]
        node_name = node_of(world, at_risk)["metadata"]["name"]
        # pods a PodDisruptionBudget holds: the run's drain (600 s) cannot finish before the Spot warning comes
        block_with_pdb(world.api, "bench", deploy_pods_on_node(world.api, node_name, 2, namespace="bench"))
        response = recommend(info, at_risk, REBALANCE_DRAIN_TIMEOUT_SECONDS="600")
        run_id = response["actions"][0]["result"].removeprefix("started run ")
        run = h.wait_run(run_id, 90, lambda r: r.steps[0].state is StepState.DRAINING)
        drain_id = run.steps[0].command_id or ""
        wait_until(lambda: (h.store.get_command(drain_id) or {}).get("status") == "running", 30, "the run's drain")

        warned = time.monotonic()
        warning = deliver(
            info,
            "spot-interruption-warning.json",
            at_risk,
            SPOT_DEADLINE_SECONDS=str(SPOT_DEADLINE),
            EARLY_REPLACEMENT="true",
        )
        said = {a["action"]: a["result"] for a in warning["actions"]}
        assert next(iter(said.values())) == "tightened", said  # the run's drain, to the Spot deadline
        assert any("skip early_replacement: already_replacing" in action for action in said), said

        run = h.wait_run(run_id, SPOT_DEADLINE + 60)
        assert run.status is RunStatus.SUCCEEDED, run.reason
        (step,) = run.steps
        assert step.state is StepState.DONE and step.drain_status == drain_status
        assert time.monotonic() - warned < SPOT_DEADLINE + 30  # by the Spot deadline, not the drain's 600 s
        drains = [i for i in h.store.query_prefix("CMD#", consistent=True) if i.get("instance_id") == at_risk]
        assert [i["sk"] for i in drains if i["kind"] == "drain"] == [f"CMD#{drain_id}"]  # one drain, not two
        assert at_risk not in h.running_instances()
        assert step.surge_instance_id in {i["InstanceId"] for i in h.groups()[worker_asg]["Instances"]}
        assert_capacity_restored(h, before)  # no detach: no second replacement to give back
    finally:
        h.stop()
