"""The size of a refresh run's ``RUN#`` item as DynamoDB counts it (``core.itemsize``), per step and at 1,000 and
2,000 steps: the steps as maps (the layout before rows) against the item as ``Run.to_item`` writes it now
(``core.runrecord``: steps at rest as rows), and shed. No world, no AWS: sizes of items built in memory.

The run is a weekly refresh of 3 kOps worker groups (``nodes-us-east-1{a,b,c}.prod.k8s.example.com``), instance ids
and node names as EC2 and kOps give them (``i-`` + 17 hex digits, ``ip-172-20-x-y.ec2.internal``), each finished step
``done`` as the refresher leaves it (spare Ready, drained, terminated; times to the microsecond, its wait starts and
command id kept in the map layout as the refresher wrote them).

    python -m bench.run_item            # the table in BENCHMARKS.md
    python -m bench.run_item --smoke    # one small size
    python -m bench.run_item --pass     # one refresher pass's CPU at 300 and 1,000 steps (below)

Then the boundary a start is held to (``lambdas/refresher/runsize.py``): the most steps of such a run that fit under
the guard (``core.runlimits.RUN_ITEM_GUARD_BYTES``) at the largest the run reaches (``core.runpeak.peak_run``) at
``max_surge`` 1, 3 and 10, found by bisection.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.dynamo.table import dynamo
from core.itemsize import DYNAMODB_ITEM_LIMIT_BYTES, item_bytes
from core.runlimits import RUN_ITEM_GUARD_BYTES
from core.runpeak import peak_run
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState

T0 = datetime(2026, 12, 2, 10, 0, 0, 123456, tzinfo=UTC)
CLUSTER = "prod.k8s.example.com"
GROUPS = [f"nodes-us-east-1{az}.{CLUSTER}" for az in "abc"]
KEYS = {"pk": f"CLUSTER#{CLUSTER}", "sk": "RUN#20261202T100000Z-abcdef"}


def step(k: int, at: datetime | None) -> RunStep:
    """Step ``k``: pending (``at`` None) or done, its replacement started at ``at``."""
    plan = RunStep(
        index=k,
        group=GROUPS[k % 3],
        role="node",
        instance_id=f"i-0{k:016x}",
        node_name=f"ip-172-20-{k // 250}-{k % 250}.ec2.internal",
        needs_update="max_age",
    )
    if at is None:
        return plan
    surging = at + timedelta(seconds=1.234567)
    ready = surging + timedelta(seconds=95.123456)
    terminating = ready + timedelta(seconds=183.654321)
    done = terminating + timedelta(seconds=31.111111)
    return plan.model_copy(
        update={
            "state": StepState.DONE,
            "surge_instance_id": f"i-0{k + 10**6:016x}",
            "command_id": f"refresh-20261202T100000Z-abcdef-{k}",
            "drain_status": "succeeded",
            "drain_message": "",
            "intent_at": terminating,
            "waiting_since": {"nodes_ready": ready},
            "started_at": surging,
            "finished_at": done,
            "spare_ready_at": ready,
            "entered": {"surging": surging, "draining": ready, "terminating": terminating, "done": done},
            "note": "replaced",
        }
    )


def run(steps: int, finished: int) -> Run:
    out, at = [], T0
    for k in range(steps):
        out.append(step(k, at if k < finished else None))
        at += timedelta(minutes=6)
    size = steps // 3
    return Run(
        run_id=KEYS["sk"][4:],
        cluster=CLUSTER,
        options=RunOptions(max_surge=10),
        created_at=T0,
        updated_at=at,
        groups=[
            GroupSurge(name=g, role="node", min_size=size, original_desired=size, original_max=size) for g in GROUPS
        ],
        steps=out,
    )


def sizes(r: Run) -> dict[str, int]:
    """Bytes of the item: steps as maps (before), as written now, shed (a stopping run that would not fit)."""

    def measured(item: dict[str, Any]) -> int:  # as ``Table.put`` writes it: None values of maps left out
        return item_bytes(dynamo({**item, **KEYS}))

    maps = r.model_dump(mode="json")
    maps["surge"], maps["surge_instance_ids"] = {}, []
    return {
        "maps": measured(maps),
        "rows": measured(r.to_item()),
        "shed": measured(r.model_copy(update={"status": RunStatus.PAUSING}).to_item(shed=True)),
    }


def guarded(r: Run) -> int:
    """Bytes of ``r``'s item as ``RunStore.size`` holds it to the guard (its keys, None values counted)."""
    return item_bytes({**r.to_item(), **KEYS})


def most_steps(max_surge: int, high: int = 8000) -> tuple[int, int]:
    """The most steps of ``run(n, 0)`` at ``max_surge`` whose peak fits under the guard, and that peak's bytes."""

    def peak(n: int) -> int:
        return guarded(peak_run(run(n, 0).model_copy(update={"options": RunOptions(max_surge=max_surge)})))

    low = 1
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if peak(mid) <= RUN_ITEM_GUARD_BYTES else (low, mid - 1)
    return low, peak(low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="one small size")
    parser.add_argument("--pass", dest="one_pass", action="store_true", help="one refresher pass's CPU (run_pass)")
    args = parser.parse_args()
    if args.one_pass:
        from bench.run_pass import main as pass_main  # bench.run_pass builds on this module's run

        pass_main([300] if args.smoke else [300, 1000])
        return
    counts = [(30, 30)] if args.smoke else [(1000, 0), (1000, 500), (1000, 1000), (2000, 0), (2000, 2000), (3000, 3000)]
    empty = sizes(run(0, 0))
    print(f"item without steps: {empty['rows']} B; DynamoDB's limit {DYNAMODB_ITEM_LIMIT_BYTES} B")
    print("| steps | finished | as maps (before) | as rows (now) | shed | per finished step, before / now |")
    print("|---|---|---|---|---|---|")
    for steps, finished in counts:
        got = sizes(run(steps, finished))
        per = f"{(got['maps'] - empty['maps']) / steps:.0f} / {(got['rows'] - empty['rows']) / steps:.0f} B"
        per = per if finished == steps else f"(pending: {per})" if finished == 0 else ""
        print(
            f"| {steps} | {finished} | {got['maps'] / 1024:.0f} KB | {got['rows'] / 1024:.0f} KB | "
            f"{got['shed'] / 1024:.0f} KB | {per} |"
        )
    print(f"\nlargest run a start accepts (its peak under the {RUN_ITEM_GUARD_BYTES} B guard):")
    print("| max_surge | steps | peak | as planned | all done |")
    print("|---|---|---|---|---|")
    for max_surge in (1, 3) if args.smoke else (1, 3, 10):
        steps, peak = most_steps(max_surge, 200 if args.smoke else 8000)
        planned, done = guarded(run(steps, 0)), guarded(run(steps, steps))
        print(f"| {max_surge} | {steps} | {peak / 1024:.0f} KB | {planned / 1024:.0f} KB | {done / 1024:.0f} KB |")


if __name__ == "__main__":
    main()
