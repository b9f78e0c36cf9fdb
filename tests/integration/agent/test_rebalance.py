"""Rebalance recommendations that resolve, end to end on the local world: the interruption Lambda's handler (in this
process, against the moto server) records and sends, ``python -m agent`` (a real process, its own RBAC) cordons,
drains and gives cordons back on the real kube-apiserver. Short settings: a 5 s quiet period checked every second,
a 15 s Spot deadline.
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

from agent.kube.views import CORDON_ANNOTATION
from core.settings import InterruptionSettings
from lambdas.interruption.handler import Deps, handle
from localworld.aws import aws_env
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext
from localworld.workloads import block_with_pdb, deploy_pods_on_node
from localworld.world import LocalWorld, Spawned
from tests.integration.agent.harness import Harness, bench_pods, log_of, wait_for

pytestmark = [
    pytest.mark.world,
    # handle() runs outside Lambda: Powertools idempotency cannot read the remaining time of a context it lacks
    pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time left"),
]

EVENTS = Path(__file__).resolve().parents[2] / "events"
QUIET = 5
SPOT_DEADLINE = 15
REBALANCE_ENV = {"CORDON_CHECK_SECONDS": "1", "LEADER_ELECTION": "false"}


class Rebalance(Harness):
    """The harness of tests/integration/agent/harness.py plus the interruption Lambda."""

    def __init__(self, world: LocalWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(world, world.setup_cluster(nodes_per_az=1), tmp_path)
        for key, value in {
            **aws_env(world.moto.endpoint_url, world.region),
            "POWERTOOLS_SERVICE_NAME": "interruption",
            "POWERTOOLS_METRICS_NAMESPACE": "NodeManagerTest",
        }.items():
            monkeypatch.setenv(key, value)
        self.responses: list[dict[str, Any]] = []

    def lambda_deps(self, **settings: str) -> Deps:
        env = {
            **self.info.env(),
            "REBALANCE_QUIET_SECONDS": str(QUIET),
            "SPOT_DEADLINE_SECONDS": str(SPOT_DEADLINE),
            "EARLY_REPLACEMENT": "false",  # the tests look at the node; no replacement instance
            **settings,
        }
        deps = Deps.from_session(InterruptionSettings.from_env(env), boto3.session.Session())
        deps.register_context(LocalLambdaContext(30, INTERRUPTION_FUNCTION))
        return deps

    def deliver(self, fixture: str, instance_id: str, event_id: str | None = None, **settings: str) -> dict[str, Any]:
        """EventBridge delivering a fixture of record for ``instance_id``, stamped now."""
        raw = json.loads((EVENTS / fixture).read_text())
        raw["id"] = event_id or str(uuid.uuid4())
        raw["time"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        old = raw["detail"]["instance-id"]
        raw["detail"]["instance-id"] = instance_id
        raw["resources"] = [r.replace(old, instance_id) for r in raw["resources"]]
        response = handle(raw, self.lambda_deps(**settings))
        self.responses.append(response)
        return response

    def rebalance(self, instance_id: str, event_id: str | None = None, **settings: str) -> str:
        response = self.deliver("rebalance-recommendation.json", instance_id, event_id, **settings)
        return f"rebalance-{response['event_id']}"

    def node(self, name: str) -> Any:
        return self.world.core.read_node(name)

    def cordoned_by(self, name: str) -> str | None:
        node = self.node(name)
        if not node.spec.unschedulable:
            return None
        return (node.metadata.annotations or {}).get(CORDON_ANNOTATION, "someone else")

    def item(self, command_id: str) -> dict[str, Any]:
        item = self.store.get_command(command_id)
        assert item is not None, command_id
        return item

    def commands_of(self, instance_id: str) -> list[dict[str, Any]]:
        return [i for i in self.store.query_prefix("CMD#", consistent=True) if i.get("instance_id") == instance_id]

    def start_agent(self, name: str = "agent", **env: str) -> Spawned:
        return self.agent(name, **{**REBALANCE_ENV, **env})


@pytest.fixture
def rebal(world: LocalWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rebalance]:
    """3 masters + 3 workers, simulator running, the Lambda's environment pointed at the moto server."""
    Metrics().clear_metrics()
    yield Rebalance(world, tmp_path, monkeypatch)
    Metrics().clear_metrics()  # Powertools keeps unflushed metrics in class-level state shared by every Metrics()


def test_a_rebalance_cordon_nothing_followed_is_given_back_after_the_quiet_period(rebal: Rebalance) -> None:
    node, instance_id = rebal.worker_node()
    agent = rebal.start_agent()
    command_id = rebal.rebalance(instance_id)
    wait_for(lambda: rebal.cordoned_by(node) == command_id, 20, "the rebalance cordon", agent)
    cordoned_at = time.monotonic()
    wait_for(lambda: rebal.item(command_id)["status"] == "succeeded", 10, "the cordon's result", agent)

    wait_for(lambda: rebal.cordoned_by(node) is None, QUIET + 15, "the cordon to be given back", agent)
    assert time.monotonic() - cordoned_at >= QUIET - 1  # not before the quiet period
    # the node is patched first, then the outcome recorded, then logged
    wait_for(lambda: rebal.item(command_id).get("resolution") == "released", 10, "the outcome", agent)
    assert CORDON_ANNOTATION not in (rebal.node(node).metadata.annotations or {})
    wait_for(lambda: "cordon given back after its quiet period command_id=" + command_id in log_of(agent), 10, "log")


def test_a_node_an_operator_cordoned_is_never_uncordoned(rebal: Rebalance) -> None:
    node, instance_id = rebal.worker_node()
    rebal.world.core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon
    agent = rebal.start_agent()
    command_id = rebal.rebalance(instance_id)
    wait_for(lambda: rebal.item(command_id).get("resolution"), QUIET + 15, "the cordon to be judged", agent)
    time.sleep(2)  # a few more checks of the releaser
    assert rebal.cordoned_by(node) == "someone else"
    assert "not cordoned by this command" in rebal.item(command_id)["resolution"]


def test_duplicate_recommendations_cordon_once_and_give_back_once(rebal: Rebalance) -> None:
    node, instance_id = rebal.worker_node()
    agent = rebal.start_agent()
    first = rebal.rebalance(instance_id, event_id="rebal-dup-1")
    again = rebal.deliver("rebalance-recommendation.json", instance_id, event_id="rebal-dup-1")  # same event
    other = rebal.deliver("rebalance-recommendation.json", instance_id)  # another recommendation, same instance
    assert again.get("replayed") is True
    assert other["status"] == "acknowledged" and other["reason"] == "rebalance_in_effect"
    assert [i["sk"] for i in rebal.commands_of(instance_id)] == [f"CMD#{first}"]
    wait_for(lambda: rebal.cordoned_by(node) == first, 20, "the rebalance cordon", agent)
    wait_for(lambda: rebal.cordoned_by(node) is None, QUIET + 15, "the cordon to be given back", agent)
    wait_for(lambda: "cordon given back after its quiet period" in log_of(agent), 10, "the log line", agent)
    time.sleep(3)  # a few more checks of the releaser: nothing is given back twice
    assert log_of(agent).count("cordon given back after its quiet period") == 1


def test_an_agent_restarted_during_the_quiet_period_still_gives_the_cordon_back(rebal: Rebalance) -> None:
    node, instance_id = rebal.worker_node()
    first = rebal.start_agent("agent-1")
    command_id = rebal.rebalance(instance_id)
    wait_for(lambda: rebal.cordoned_by(node) == command_id, 20, "the rebalance cordon", first)
    wait_for(lambda: rebal.item(command_id)["status"] == "succeeded", 10, "the cordon's result", first)
    first.kill()  # SIGKILL during the quiet period: nothing of it is kept in memory
    first.wait(10)
    time.sleep(QUIET + 1)
    assert rebal.cordoned_by(node) == command_id  # no one gave it back meanwhile
    second = rebal.start_agent("agent-2")
    wait_for(lambda: rebal.cordoned_by(node) is None, 20, "the new agent to give the cordon back", second)
    wait_for(lambda: rebal.item(command_id).get("resolution") == "released", 10, "the outcome", second)
    assert "cordon given back" not in log_of(first)


@pytest.mark.parametrize(
    ("pdb_policy", "status"),
    [("delete", "succeeded"), ("honor", "timed_out")],
    ids=["pdb-delete-at-the-deadline", "pdb-honoured"],
)
def test_a_spot_warning_after_a_rebalance_drain_tightens_it_to_the_spot_deadline(
    rebal: Rebalance, pdb_policy: str, status: str
) -> None:
    node, instance_id = rebal.worker_node()
    app = deploy_pods_on_node(rebal.world.api, node, 2)
    block_with_pdb(rebal.world.api, "bench", app)  # the rebalance drain cannot finish: it honours the budget
    agent = rebal.start_agent(DRAIN_PDB_DEADLINE_POLICY=pdb_policy)
    drain_id = rebal.rebalance(instance_id, REBALANCE_POLICY="drain", REBALANCE_DRAIN_TIMEOUT_SECONDS="600")
    wait_for(lambda: rebal.item(drain_id)["status"] == "running", 20, "the rebalance drain to run", agent)
    wait_for(lambda: rebal.cordoned_by(node) == drain_id, 10, "the rebalance cordon", agent)
    time.sleep(2)
    assert len(bench_pods(rebal, node)) == 2  # held by the budget

    warned = time.monotonic()
    response = rebal.deliver("spot-interruption-warning.json", instance_id, REBALANCE_POLICY="drain")
    results = [a["result"] for a in response["actions"]]
    assert results[0] == "tightened", response
    spot_id = f"spot-{response['event_id']}"

    wait_for(lambda: rebal.item(drain_id)["status"] == status, SPOT_DEADLINE + 20, "the drain to end", agent)
    ended = time.monotonic() - warned
    assert ended < SPOT_DEADLINE + 5  # by the Spot deadline, not the rebalance drain's 600 s
    drains = [i for i in rebal.commands_of(instance_id) if i["kind"] == "drain"]
    assert [i["sk"] for i in drains] == [f"CMD#{drain_id}"]  # one drain, not two
    item = rebal.item(drain_id)
    assert item["tightened_by"] == spot_id and item["resolution"] == f"escalated by {spot_id}"
    assert "drain deadline tightened command_id=" + drain_id in log_of(agent)
    if status == "succeeded":  # deadline-bound now: the budget's pods got SIGTERM before the reclaim
        assert "deleted past their PodDisruptionBudget" in item["result"]["message"]
        assert bench_pods(rebal, node) == []
    else:
        assert len(bench_pods(rebal, node)) == 2
    time.sleep(QUIET + 2)
    assert rebal.cordoned_by(node) == drain_id  # an escalated cordon is never given back


def test_a_spot_warning_after_a_rebalance_cordon_escalates_it_to_one_drain(rebal: Rebalance) -> None:
    node, instance_id = rebal.worker_node()
    deploy_pods_on_node(rebal.world.api, node, 2)
    agent = rebal.start_agent()
    cordon_id = rebal.rebalance(instance_id)
    wait_for(lambda: rebal.cordoned_by(node) == cordon_id, 20, "the rebalance cordon", agent)

    response = rebal.deliver("spot-interruption-warning.json", instance_id)
    spot_id = f"spot-{response['event_id']}"
    wait_for(lambda: rebal.item(spot_id)["status"] == "succeeded", 30, "the Spot drain", agent)
    drains = [i for i in rebal.commands_of(instance_id) if i["kind"] == "drain"]
    assert [i["sk"] for i in drains] == [f"CMD#{spot_id}"]
    # kept either way: the Lambda marks it escalated right after recording the drain, unless the agent's cordon
    # check ran in between and found the newer command first (seen under load: both keep the cordon for good)
    assert rebal.item(cordon_id)["resolution"] in (f"escalated by {spot_id}", f"superseded by {spot_id} (drain)")
    assert rebal.cordoned_by(node) == spot_id  # the Spot drain took the cordon over
    time.sleep(QUIET + 2)
    assert rebal.cordoned_by(node) == spot_id
