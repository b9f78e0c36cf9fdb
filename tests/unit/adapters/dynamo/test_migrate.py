"""The upgrade from the one-partition layout (adapters.dynamo.migrate, ``node-manager migrate-table``) on moto's
DynamoDB: the agent's items written the old way are invisible until moved, then read where the code reads them; the
Lambdas' items stay; an item already written in the new place is kept; a second run moves nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.store import Store
from cli.main import main
from core.schema import agent_partition_of, partition_of, state_table

CLUSTER = "demo.k8s.local"
OLD = partition_of(CLUSTER)


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield ddb.Table("state")


def test_the_agents_items_move_to_their_partition_and_the_lambdas_items_stay(table: Any) -> None:
    old_items = {
        "NODE#i-1": {"instance_id": "i-1", "node_name": "n1", "ready": True, "reported_at": "2026-12-02T10:00:00Z"},
        "MEMBERSHIP": {"reported_at": "2026-12-02T10:00:00Z", "nodes": 1},
        "CMD#spot-1": {"command_id": "spot-1", "status": "queued"},
        "CMD#spot-2": {"command_id": "spot-2", "status": "queued"},
        "HOOK#i-1": {"state": "pending"},
        "CPDRAIN#0": {"command_id": "refresh-1"},
        "LOCK": {"holder": "replenisher:r", "fencing": 3},
        "COMP#nodes-a": {"asg_name": "nodes-a"},
        "RUN#r1": {"run_id": "r1"},
    }
    for sk, attrs in old_items.items():
        table.put_item(Item={"pk": OLD, "sk": sk, **attrs})
    store = Store(table, CLUSTER)
    store.put("CMD#spot-2", {"command_id": "spot-2", "status": "succeeded"})  # written since the upgrade
    assert store.get_command("spot-1") is None and store.recorded_nodes() == []  # the old place is not read

    lines: list[str] = []
    argv = ["migrate-table", "--cluster", CLUSTER, "--table-name", "state"]
    assert main(argv, environ={}, out=lines.append) == 0
    assert lines == ["moved: 5 CMD#=1 CPDRAIN#=1 HOOK#=1 MEMBERSHIP=1 NODE#=1", "kept: 1 CMD#=1"]

    assert (store.get_command("spot-1") or {})["status"] == "queued"
    assert (store.get_command("spot-2") or {})["status"] == "succeeded"  # the newer one is kept
    assert [r.instance_id for r in store.recorded_nodes()] == ["i-1"] and store.membership_mark() is not None
    assert store.get("HOOK#i-1") is not None and store.get("CPDRAIN#0") is not None
    left = {
        item["sk"]
        for item in table.query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": OLD})["Items"]
    }
    assert left == {"LOCK", "COMP#nodes-a", "RUN#r1"}
    agent = table.query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": agent_partition_of(CLUSTER)})
    assert len(agent["Items"]) == 6

    lines.clear()
    assert main(argv, environ={}, out=lines.append) == 0
    assert lines == ["moved: 0", "kept: 0"]


def test_the_table_name_is_required() -> None:
    errors: list[str] = []
    assert main(["migrate-table", "--cluster", CLUSTER], environ={}, out=print, err=errors.append) == 2
    assert errors == ["node-manager: --table-name or TABLE_NAME is required"]
