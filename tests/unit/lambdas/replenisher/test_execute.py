"""The replenisher's executor under the cluster lock: a lease lost mid-plan stops it at the next fenced write, and
nothing after that write reaches the table or AWS (moto's DynamoDB for the table, a recording double for AWS)."""

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.capacity import Bounds
from core.exceptions import AwsRequestError, LockLostError
from core.ledger import Ledger
from core.model import Command
from core.schema import state_table
from lambdas.replenisher.decide.builder import Plan
from lambdas.replenisher.execute import Effects, execute
from lambdas.replenisher.plan import Operation, SendDrain, SetCapacity, Terminate, WriteLedger

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[Store]:
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield Store(ddb.Table("state"), "demo")


class Recorder:
    """What the executor asked of AWS and of the metrics."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.autoscaling = SimpleNamespace(
            set_capacity=lambda name, desired, max_size: self.calls.append(("set_capacity", name)),
            terminate_in_group=lambda instance_id, decrement: self.calls.append(("terminate", instance_id)) or True,
        )
        self.queue = SimpleNamespace(send_command=lambda c: self.calls.append(("send", c.command_id)) or "m-1")

    def count(self, name: str, value: int = 1) -> None:
        self.calls.append(("metric", name))

    def count_by(self, name: str, dimension: str, value: str) -> None:
        self.calls.append(("metric", name))


def effects(store: Store, recorder: Recorder, lease: Any) -> Effects:
    return Effects(
        store=store,
        aws=recorder,  # type: ignore[arg-type]  # a recording double of AwsPort
        telemetry=recorder,  # type: ignore[arg-type]  # and of Telemetry
        logger=logging.getLogger("test"),
        ttl_seconds=3600,
        lease=lease,
        bounds={"nodes-b": Bounds("nodes-b", min_size=0, max_limit=10, source="test")},  # sizes are clamped to these
    )


def plan() -> Plan:
    drain = Command(
        command_id="giveback-1",
        cluster="demo",
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=T0 + timedelta(minutes=10),
    )
    return Plan(
        actions=(
            WriteLedger(Ledger(asg_name="nodes-a"), None, "intent"),
            SetCapacity("nodes-b", desired=3, why="cover nodes-a"),
            SendDrain(drain),
        ),
        operation=Operation.REPLENISH,
    )


def test_under_the_current_lease_the_whole_plan_is_applied(store: Store) -> None:
    recorder = Recorder()
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 120)
    results = execute(plan(), effects(store, recorder, lease), T0)
    assert [r["result"] for r in results][:2] == ["written", "updated"]
    assert ("set_capacity", "nodes-b") in recorder.calls and ("send", "giveback-1") in recorder.calls
    assert store.get("COMP#nodes-a") is not None


def test_a_lease_taken_over_stops_the_plan_before_anything_is_applied(store: Store) -> None:
    recorder = Recorder()
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 120)
    LeaseLock(store, clock=lambda: 1200.0).acquire("refresher:r", "refresh", 1800)  # expired, taken over
    with pytest.raises(LockLostError):
        execute(plan(), effects(store, recorder, lease), T0)
    assert recorder.calls == []  # no Auto Scaling call, no message
    assert store.get("COMP#nodes-a") is None and store.get_command("giveback-1") is None


def test_a_lease_lost_mid_plan_stops_at_the_next_fenced_write(store: Store) -> None:
    recorder = Recorder()
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 120)
    fx = effects(store, recorder, lease)

    def steal(action: object) -> None:  # the lease runs out while the Auto Scaling call is in flight
        if isinstance(action, SetCapacity):
            LeaseLock(store, clock=lambda: 1200.0).acquire("refresher:r", "refresh", 1800)

    fx = Effects(**{**fx.__dict__, "after_action": steal})
    with pytest.raises(LockLostError):
        execute(plan(), fx, T0)
    assert ("send", "giveback-1") not in recorder.calls
    assert store.get_command("giveback-1") is None


@pytest.mark.parametrize("decrement", [True, False])
def test_a_terminate_of_an_instance_no_longer_in_its_group_decremented_nothing(store: Store, decrement: bool) -> None:
    """Auto Scaling answers "not part of the group" (the adapter's False): the instance left another way, so a
    decrement did not happen and the ledger write after it, which would count it given back, is not applied; a
    terminate without decrement asked nothing more than that, and the plan goes on."""
    recorder = Recorder()
    recorder.autoscaling.terminate_in_group = lambda instance_id, dec: recorder.calls.append(("terminate", instance_id))
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 120)
    given_back = Plan(
        actions=(
            Terminate("i-0123456789abcdef0", "nodes-b", decrement, "given back after drain (giveback-1)"),
            WriteLedger(Ledger(asg_name="nodes-a"), None, "given back and cleared"),
        ),
        operation=Operation.SCALE_BACK,
    )
    results = execute(given_back, effects(store, recorder, lease), T0)
    assert results[0]["result"] == "no longer in an Auto Scaling group"
    assert (store.get("COMP#nodes-a") is not None) is (not decrement)


def test_a_refused_resize_is_counted_and_the_rest_of_the_plan_still_applies(store: Store) -> None:
    """An UpdateAutoScalingGroup refused for good (AccessDenied, a validation error after kOps changed the group's
    sizes) raised out of every invocation's plan: nothing after it was applied, at every tick. Now it is counted and
    logged; what follows applies, but for the later resizes and terminates of that group (decided on the sizes it
    asked)."""
    recorder = Recorder()

    def refuse(name: str, desired: int | None, max_size: int | None) -> None:
        recorder.calls.append(("set_capacity", name))
        if name == "nodes-b":
            raise AwsRequestError("UpdateAutoScalingGroup", "AccessDenied", "not authorized")

    recorder.autoscaling.set_capacity = refuse
    lease = LeaseLock(store, clock=lambda: 1000.0).acquire("replenisher:a", "replenish", 120)
    refused = Plan(
        actions=(
            WriteLedger(Ledger(asg_name="nodes-a"), None, "cancel asked"),
            SetCapacity("nodes-b", desired=3, why="cancel"),
            Terminate("i-0123456789abcdef0", "nodes-b", True, "given back after drain (giveback-1)"),
            SetCapacity("nodes-c", max_size=4, why="MaxSize restored"),
            WriteLedger(Ledger(asg_name="nodes-c"), None, "restore asked"),
        ),
        operation=Operation.SCALE_BACK,
    )
    fx = effects(store, recorder, lease)
    fx = Effects(**{**fx.__dict__, "bounds": {**fx.bounds, "nodes-c": Bounds("nodes-c", 0, 10, "test")}})
    results = [r["result"] for r in execute(refused, fx, T0)]
    assert results[1].startswith("refused") and results[2].startswith("not applied")
    assert results[3] == "updated" and results[4] == "written"
    assert ("terminate", "i-0123456789abcdef0") not in recorder.calls
    assert ("metric", "CapacityChangeRefused") in recorder.calls
    assert store.get("COMP#nodes-c") is not None
