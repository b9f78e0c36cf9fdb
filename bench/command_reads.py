"""Benchmark of what a Spot warning's look-up of its instance's commands reads (not a test; results go to
BENCHMARKS.md): ``adapters.dynamo.commands.commands_for_instance`` on moto's DynamoDB, after a weekly refresh of
``--nodes`` workers left one finished drain each (a result naming ``--pods`` pods), before and after the command
index is complete (``adapters.dynamo.command_index``), and what the pointer backfill reads when it is due (an
environment's first tick, then every half hour).

Reported per look-up: calls, items DynamoDB read (a Query's ``ScannedCount``: a FilterExpression drops items after
they are read) and their bytes (``core.itemsize.item_bytes``, DynamoDB's count), and the strongly consistent read
units they cost: a Query's items are one read whose total size is rounded up to 4 KB, a GetItem's item rounded up on
its own, 1 unit per 4 KB ("Read/write capacity mode", "Read request units and read capacity units", DynamoDB
Developer Guide). Then what a wave of ``--wave`` warnings asks of the agent partition at once, against the 3,000 read
units a second one partition serves ("Best practices for designing and using partition keys effectively").

Deterministic (counts, not times). Usage: ``python -m bench.command_reads --nodes 1000 --pods 15 --wave 50``.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import boto3
from moto import mock_aws

from adapters.dynamo.command_index import BACKFILLED, MARK_SK, backfill_pointers, mark_index
from adapters.dynamo.commands import commands_for_instance
from adapters.dynamo.store import Store
from core.itemsize import item_bytes
from core.model import Command, CommandKind, CommandStatus, utcnow
from core.schema import state_table
from lambdas.common.sweep import sweep_commands

TTL = 7 * 86400
WARNED = "i-0aaaaaaaaaaaaaaaa"
PARTITION_READ_UNITS = 3000  # a second, per partition (DynamoDB Developer Guide, partition key best practices)


def result(node: int, pods: int) -> dict[str, Any]:
    """A drain's result as the agent writes it: one outcome per pod."""
    outcomes = [
        {
            "namespace": "shop",
            "name": f"web-{node}-{p:02d}-7d9f8c6b5-x2k4q",
            "uid": f"0f1e2d3c-{node:04d}-{p:04d}-9a8b-7c6d5e4f3a2b",
            "action": "evict",
            "reason": "owned by ReplicaSet web-7d9f8c6b5",
            "attempts": 1,
            "evicted_at": "2026-01-11T03:12:45.123456+00:00",
            "gone": True,
            "grace_seconds": 30,
            "grace_source": "pod",
        }
        for p in range(pods)
    ]
    return {"status": "succeeded", "message": f"drained node {node}", "pods": outcomes, "remaining": [], "errors": []}


def record(store: Store, command: Command, pods: int, node: int) -> None:
    now = utcnow()  # the first command's index mark is then a TTL from complete: the look-up reads the range
    store.record_command(command, TTL, now=now)
    attempt = store.start_command(command, "agent-a", 60, TTL, now=now)
    store.finish_command(command.command_id, "agent-a", attempt, CommandStatus.SUCCEEDED, result(node, pods), now=now)


def measure(store: Store, sizes: dict[str, int], look: Callable[[Store], list[Any]]) -> dict[str, Any]:
    """One look-up (``look``), counted (module docstring)."""
    table = store.table
    reads: list[tuple[str, int, int]] = []  # (call, items read, bytes read)
    query, get_item = table.query, table.get_item

    def counted_query(**kwargs: Any) -> Any:
        out = query(**kwargs)
        answered = [str(i["sk"]) for i in out.get("Items", [])]
        if out["ScannedCount"] == len(answered):
            size = sum(sizes[sk] for sk in answered)
        else:  # filtered (only the CMD# range is read so): the page read the range's keys after its start key,
            # up to its last evaluated key (a page ends at 1 MB read)
            low = (kwargs.get("ExclusiveStartKey") or {}).get("sk", "")
            high = (out.get("LastEvaluatedKey") or {}).get("sk", "CMD$")
            read = [sk for sk in sizes if sk.startswith("CMD#") and low < sk <= high]
            assert out["ScannedCount"] == len(read), "a filtered Query of something else than the CMD# range"
            size = sum(sizes[sk] for sk in read)
        reads.append(("Query", out["ScannedCount"], size))
        return out

    def counted_get(**kwargs: Any) -> Any:
        out = get_item(**kwargs)
        item = out.get("Item")
        reads.append(("GetItem", 1 if item else 0, sizes.get(str(item["sk"]), 0) if item else 0))
        return out

    table.query, table.get_item = counted_query, counted_get
    try:
        found = look(store)
    finally:
        del table.query, table.get_item
    units = sum(max(1, math.ceil(size / 4096)) for _, _, size in reads)
    return {
        "commands": len(found),
        "calls": len(reads),
        "items": sum(n for _, n, _ in reads),
        "bytes": sum(b for _, _, b in reads),
        "units": units,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=15)
    parser.add_argument("--wave", type=int, default=50)
    args = parser.parse_args()
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        table = ddb.Table("state")
        writer = Store(table, "demo")
        deadline = utcnow() + timedelta(minutes=10)
        for n in range(args.nodes):
            instance = f"i-{n:017x}"
            command = Command(
                command_id=f"refresh-20260111T030000Z-ab12cd-{n}-drain",
                cluster="demo",
                kind=CommandKind.DRAIN,
                instance_id=instance,
                deadline=deadline,
            )
            record(writer, command, args.pods, n)
        for cid, kind in (("rebalance-1", CommandKind.CORDON), ("spot-1", CommandKind.DRAIN)):
            warned = Command(command_id=cid, cluster="demo", kind=kind, instance_id=WARNED, deadline=deadline)
            writer.record_command(warned, TTL, now=utcnow())  # open: queued
        sizes: dict[str, int] = {}
        page: dict[str, Any] = {"LastEvaluatedKey": None}
        while "LastEvaluatedKey" in page:
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]} if page["LastEvaluatedKey"] else {}
            page = dict(table.scan(**start))
            sizes.update({str(i["sk"]): item_bytes(i) for i in page["Items"]})
        look_up, sweep = lambda s: commands_for_instance(s, WARNED), lambda s: open_items(s)
        # the mark was written with the first command, a TTL from complete: the range is read
        before = (measure(Store(table, "demo"), sizes, look_up), measure(Store(table, "demo"), sizes, sweep))
        writer.delete(MARK_SK)
        mark_index(Store(table, "demo"), TTL, utcnow() - timedelta(days=8))  # as if written a TTL and an hour ago
        after = (measure(Store(table, "demo"), sizes, look_up), measure(backfilled(table), sizes, sweep))
        # the tick above was the first since the drains ended (their pointers all there); one that deletes them, then
        # a tick as every tick is when the sweep runs each minute: the open commands and those ended since
        sweep_commands(backfilled(table), NoSender(), utcnow(), 300, dry_run=False, logger=logging.getLogger("b"))
        steady = measure(backfilled(table), sizes, sweep)
        # what a backfill adds (first tick, every 5 min in the first hour, half-hourly after): none lacks pointers here
        backfill = measure(Store(table, "demo"), sizes, lambda s: list(backfill_pointers(s, utcnow()).pointed))
    print(f"{args.nodes} finished drains of {args.pods} pods in the week; the warned instance has 2 commands queued")
    print("(recent: not resent)\n")
    print(f"| look-up | path | found | calls | items read | bytes read | read units | a wave of {args.wave} (units) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows = (
        ("a warned instance's commands", "CMD# range + filter (before)", before[0]),
        ("a warned instance's commands", "ICMD# pointers (index complete)", after[0]),
        ("the sweep's open commands (a tick)", "CMD# range + filter (before)", before[1]),
        ("the sweep's open commands (a tick)", "OCMD# pointers, the first tick after the drains ended", after[1]),
        ("the sweep's open commands (a tick)", "OCMD# pointers, any tick after", steady),
        ("the pointer backfill (first tick of an environment, then every 30 min)", "CMD# range + filter", backfill),
    )
    for what, name, m in rows:
        wave = m["units"] * args.wave
        found = m["commands"] if "warned" in what else "-"
        print(
            f"| {what} | {name} | {found} | {m['calls']} | {m['items']} | {m['bytes']:,} | {m['units']} | "
            + (f"{wave:,} ({wave / PARTITION_READ_UNITS:.1f} s of one partition) |" if "warned" in what else "|")
        )


def backfilled(table: Any) -> Store:
    """A ``Store`` whose environment backfilled the pointers a moment ago (``backfill_pointers`` not due): a sweep's
    tick between two backfills."""
    store = Store(table, "demo")
    store.memo[BACKFILLED] = utcnow().timestamp()
    return store


def open_items(store: Store) -> list[Any]:
    """The sweep's read (a dry run: nothing written or sent)."""
    done = sweep_commands(store, NoSender(), utcnow(), 300, dry_run=True, logger=logging.getLogger("bench"))
    return [*done["resent"], *done["expired"]]


class NoSender:
    def send_command(self, command: Command) -> str:
        raise AssertionError("a dry run sends nothing")


if __name__ == "__main__":
    main()
