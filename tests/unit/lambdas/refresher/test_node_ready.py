"""The refresher on the agent's "Node Ready" report: a hint to read again, never a fact. Without a run it costs one
Query; a report of another group is acknowledged; a report of the run's spare advances the run only as far as what
the pass itself reads (``NODE#``, the group) allows (moto)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import boto3
import pytest

from core.model import CommandStatus, NodeRecord
from core.runs import StepState, WaitDeadline
from lambdas.events.event import Event, EventKind
from lambdas.refresher import service
from tests.unit.lambdas.refresher.moto_cluster import (
    REGION,
    RUN_ID,
    SETTINGS,
    T0,
    Cluster,
    moto_cluster,
    pending_run,
    surging_run,
)

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/commands"


def ready(*instance_ids: str, groups: tuple[str, ...] | None = None, cluster: str = "demo") -> Event:
    return Event(
        kind=EventKind.NODE_READY,
        event_time=T0,
        event_id="0d9c7e52-8b1f-4a7e-9a53-2c4f1e0b6d11",
        cluster=cluster,
        instance_ids=instance_ids,
        asg_names=groups if groups is not None else tuple("nodes" for _ in instance_ids),
    )


def test_a_report_concerns_a_run_by_its_groups_its_instances_or_an_unknown_group() -> None:
    run = surging_run("i-0aaaaaaaaaaaaaaa1")
    assert service.waits_on(run, ready("i-0bbbbbbbbbbbbbbb2"))  # a node of the run's group (a spare)
    # one of its old instances: only while a step counts Ready nodes (a NotReady node due later blocks a step)
    assert not service.waits_on(run, ready("i-0aaaaaaaaaaaaaaa1"))
    assert not service.waits_on(run, ready("i-0aaaaaaaaaaaaaaa1", groups=("elsewhere",)))
    counting = run.model_copy(deep=True)
    counting.steps[0].waiting_since[WaitDeadline.NODES_READY.value] = T0
    assert service.waits_on(counting, ready("i-0aaaaaaaaaaaaaaa1"))
    settling = run.model_copy(deep=True)
    settling.steps[0].state = StepState.SETTLING
    assert service.waits_on(settling, ready("i-0aaaaaaaaaaaaaaa1"))
    # the agent's first report names every node: old ones and one the run may count or take as its spare
    assert service.waits_on(run, ready("i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"))
    spared = run.model_copy(deep=True)
    spared.steps[0].surge_instance_id = "i-0ccccccccccccccc3"
    assert service.waits_on(spared, ready("i-0ccccccccccccccc3", groups=("elsewhere",)))  # its spare
    assert service.waits_on(run, ready("i-0bbbbbbbbbbbbbbb2", groups=("",)))  # the agent could not tell its group
    assert not service.waits_on(run, ready("i-0bbbbbbbbbbbbbbb2", groups=("other-group",)))


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with moto_cluster(monkeypatch, SETTINGS.model_copy(update={"queue_url": QUEUE})) as c:
        boto3.client("sqs", region_name=REGION).create_queue(QueueName="commands")
        yield c


def dynamodb_calls(deps: object) -> Counter[str]:
    counted: Counter[str] = Counter()
    client = deps.store.table.meta.client  # type: ignore[attr-defined]
    client.meta.events.register("before-call", lambda model, **_: counted.update([model.name]))
    return counted


def test_without_a_run_a_report_costs_one_query(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    counted = dynamodb_calls(deps)
    assert service.serve(ready("i-0bbbbbbbbbbbbbbb2"), deps, 5.0) == {
        "status": "acknowledged",
        "reason": "no_active_run",
    }
    assert counted == Counter({"Query": 1})
    other = service.serve(ready("i-0bbbbbbbbbbbbbbb2", cluster="another"), deps, 5.0)
    assert other == {"status": "acknowledged", "reason": "other_cluster"} and counted == Counter({"Query": 1})


def test_a_report_of_another_group_leaves_the_run_alone(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    deps.runs.create(surging_run(cluster.instances()[0]))
    counted = dynamodb_calls(deps)
    out = service.serve(ready("i-0bbbbbbbbbbbbbbb2", groups=("other-group",)), deps, 5.0)
    assert out == {"status": "acknowledged", "reason": "not_in_run"} and counted == Counter({"Query": 1})


def put_ready(deps: object, instance_id: str, ready_: bool = True) -> None:
    record = NodeRecord(
        instance_id=instance_id, node_name=f"n-{instance_id}", asg_name="nodes", ready=ready_, reported_at=T0
    )
    deps.store.put_node(record, 600)  # type: ignore[attr-defined]


def messages() -> list[object]:
    return (
        boto3.client("sqs", region_name=REGION)
        .receive_message(QueueUrl=QUEUE, MaxNumberOfMessages=10)
        .get("Messages", [])
    )


def test_a_report_advances_the_run_only_as_far_as_what_it_reads_allows(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    old, other = cluster.instances()
    run = surging_run(old)
    run.steps[0].surge_baseline = [old, other]
    deps.runs.create(run)
    service.advance_run(deps, None, 0.0, "first")  # desired 3: Auto Scaling launches the spare
    (spare,) = set(cluster.instances()) - {old, other}
    put_ready(deps, old)
    put_ready(deps, other)

    # a report (forged, or ahead of the item) of the spare while its NODE# item says nothing: nothing is drained
    out = service.serve(ready(spare), cluster.new_deps(), 0.0)
    saved = deps.runs.get(RUN_ID)
    assert out["status"] == "advanced" and saved is not None
    assert saved.steps[0].state is StepState.SURGING and "register" in saved.waiting
    put_ready(deps, spare, ready_=False)
    service.serve(ready(spare), cluster.new_deps(), 0.0)
    saved = deps.runs.get(RUN_ID)
    assert saved is not None and saved.steps[0].state is StepState.SURGING and "to be Ready" in saved.waiting
    assert messages() == [] and deps.store.get_command(f"refresh-{RUN_ID}-0") is None

    # the node is Ready in the table: the report wakes the run, which drains the old node
    put_ready(deps, spare)
    out = service.serve(ready(spare), cluster.new_deps(), 0.0)
    saved = deps.runs.get(RUN_ID)
    assert saved is not None and saved.steps[0].state is StepState.DRAINING
    assert saved.steps[0].surge_instance_id == spare
    command = deps.store.get_command(f"refresh-{RUN_ID}-0")
    assert command is not None and command["status"] == CommandStatus.QUEUED.value
    assert command["command"]["instance_id"] == old and len(messages()) == 1


def test_a_launch_costs_no_call_the_surge_recorded_its_wait(cluster: Cluster) -> None:
    """Auto Scaling's "Launch Successful" ends no wait a pass must record: the surge recorded its spare's launch wait
    (the tick enforces its deadline) and the spare's "Node Ready" advances the run. Acknowledged with no call."""
    deps = cluster.new_deps()
    old, other = cluster.instances()
    deps.runs.create(pending_run(old))
    service.advance_run(deps, None, 0.0, "first")  # the surge: desired 3, the launch wait's start saved with it
    surged = deps.runs.get(RUN_ID)
    assert surged is not None and surged.steps[0].waiting_since == {"spare_launch": surged.updated_at}
    (spare,) = set(cluster.instances()) - {old, other}
    counted = dynamodb_calls(deps)
    launch = Event(kind=EventKind.LAUNCH_SUCCEEDED, event_time=T0, event_id="e-1", asg_name="nodes", instance_id=spare)
    assert service.serve(launch, deps, 5.0) == {"status": "acknowledged", "reason": "recorded_at_surge"}
    assert counted == Counter() and (deps.runs.get(RUN_ID) or surged).version == surged.version
