"""Benchmark: what the product's table calls cost on the simulation's in-memory DynamoDB (``sim.dynamo``).

A cluster partition of ``--nodes`` ``NODE#`` items and as many ``CMD#`` items (the state of a fleet that size), then
each call the Lambdas and the agent make, through the real adapters (``adapters.dynamo``), repeated and timed (CPU
time of this process, ``time.process_time``: the work is CPU-bound and single-threaded, and CPU time does not count
the waits of a machine shared with other work): the lock (read, acquire/renew), a fenced ``TransactWriteItems``
put, a command's start (read + conditional update) and heartbeat, and the whole-partition Query the Lambdas read the
cluster with (``query_partition``, and the table's own ``query`` without the adapter's conversion to plain values),
with and without ``copy_reads``. The simulation's speed target (issue 12: 1,000 nodes for 7
simulated days in under 30 s a seed) divides by these.

Usage: ``python -m bench.sim_dynamo --nodes 1000 [--markdown]``; ``--smoke`` runs 50 nodes, numbers not judged.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from boto3.dynamodb.conditions import Key

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.store import Store
from core.model import Command, CommandKind, NodeRecord
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def instance(i: int) -> str:
    return f"i-{i:017x}"


def command(i: int) -> Command:
    return Command(
        command_id=f"c-{i}",
        cluster="demo",
        kind=CommandKind.DRAIN,
        instance_id=instance(i),
        deadline=T0 + timedelta(minutes=2),
    )


def fleet(nodes: int, copy_reads: bool) -> Store:
    kernel = Kernel(seed=1)
    store = Store(MemoryDynamo(kernel, Faults(kernel), copy_reads=copy_reads).table("state"), "demo")
    for i in range(nodes):
        record = NodeRecord(
            instance_id=instance(i), node_name=f"node-{i}", asg_name="nodes-a", ready=True, reported_at=T0
        )
        store.put_node(record, 3600)
        store.record_command(command(i), 3600, now=T0)
    return store


def timed(repeat: int, call: Callable[[int], object]) -> float:
    """Mean CPU milliseconds of ``call(i)`` over ``repeat`` calls."""
    start = time.process_time()
    for i in range(repeat):
        call(i)
    return 1000 * (time.process_time() - start) / repeat


def measure(nodes: int, repeat: int, copy_reads: bool) -> list[tuple[str, float]]:
    store = fleet(nodes, copy_reads)
    lock = LeaseLock(store, clock=lambda: 1000.0)
    lease = lock.acquire("bench", "refresh", 1e9)
    n, queries = min(repeat, nodes), max(3, repeat // 50)
    key = Key("pk").eq(store.agent_pk)  # the agent partition: the NODE# and CMD# items, the bulk of the fleet

    def start(i: int) -> object:
        return store.start_command(command(i), "w", 60, 3600, now=T0)

    def beat(i: int) -> object:
        return store.heartbeat_command(f"c-{i}", "w", 1, now=T0)

    rows = [
        ("GetItem LOCK (Table.get)", timed(repeat, lambda _: store.get("LOCK"))),
        ("LeaseLock.acquire (held: read + renew)", timed(repeat, lambda _: lock.acquire("bench", "refresh", 1e9))),
        ("fenced put (TransactWriteItems)", timed(repeat, lambda i: store.put(f"X#{i}", {"v": i}, fence=lease))),
        ("start_command (read + conditional update)", timed(n, start)),
        ("heartbeat_command (conditional update)", timed(n, beat)),
    ]
    items = len(list(store.query_partition()))  # after the writes above
    return [
        *rows,
        (f"query_partition ({items} items)", timed(queries, lambda _: list(store.query_partition()))),
        ("query_prefix NODE#", timed(queries, lambda _: list(store.query_prefix("NODE#")))),
        (
            "the agent partition's Query, MemoryTable.query alone",
            timed(queries, lambda _: store.table.query(KeyConditionExpression=key)),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=500, help="calls of each small operation (default 500)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--smoke", action="store_true", help="50 nodes, 20 calls, numbers not judged")
    args = parser.parse_args(argv)
    nodes, repeat = (50, 20) if args.smoke else (args.nodes, args.repeat)
    copied = measure(nodes, repeat, copy_reads=True)
    shared = measure(nodes, repeat, copy_reads=False)
    if args.markdown:
        print(f"| call ({nodes} nodes) | CPU ms a call, copy_reads | CPU ms a call, shared reads |")
        print("|---|---|---|")
    for (label, a), (_, b) in zip(copied, shared, strict=True):
        print(f"| {label} | {a:.3f} | {b:.3f} |" if args.markdown else f"{label:55s} {a:9.3f} ms {b:9.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
