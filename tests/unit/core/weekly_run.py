"""A weekly refresh of three worker groups as its ``RUN#`` record holds it (``weekly_refresh``: the first steps
replaced, as the refresher leaves a ``done`` step, ``replaced``; the rest pending), and the item's keys: shared by the
run record's tests (``test_runrecord``, ``test_rowcache``, ``test_runrecord_memo``, ``test_rowread_order``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState

T0 = datetime(2026, 12, 2, 10, 0, 0, 123456, tzinfo=UTC)
CLUSTER = "prod.k8s.example.com"
GROUPS = [f"nodes-us-east-1{az}.{CLUSTER}" for az in "abc"]
RUN_ID = "20261202T100000Z-abcdef"
KEYS = {"pk": f"CLUSTER#{CLUSTER}", "sk": f"RUN#{RUN_ID}"}
ITEM_BUDGET = 300 * 1024  # a run of 2,100 finished steps stays under this (DynamoDB's cap is 400 KB)


def replaced(index: int, at: datetime) -> RunStep:
    """A worker step as the refresher leaves it ``done``: spare Ready, drained, terminated (times to the us)."""
    surging = at + timedelta(seconds=1.234567)
    ready = surging + timedelta(seconds=95.123456)
    terminating = ready + timedelta(seconds=183.654321)
    done = terminating + timedelta(seconds=31.111111)
    return RunStep(
        index=index,
        group=GROUPS[index % 3],
        role="node",
        instance_id=f"i-{index:017x}",
        node_name=f"ip-172-20-{index // 250}-{index % 250}.ec2.internal",
        needs_update="max_age",
        state=StepState.DONE,
        surge_instance_id=f"i-{index + 10**6:017x}",
        command_id=f"refresh-{RUN_ID}-{index}",
        drain_status="succeeded",
        drain_message="",
        intent_at=terminating,
        waiting_since={"nodes_ready": ready},
        started_at=surging,
        finished_at=done,
        spare_ready_at=ready,
        entered={"surging": surging, "draining": ready, "terminating": terminating, "done": done},
        note="replaced",
    )


def weekly_refresh(steps: int, finished: int) -> Run:
    """3 worker groups, ``steps`` instances, the first ``finished`` of them replaced, the rest pending."""
    out, at = [], T0
    for k in range(steps):
        if k < finished:
            step = replaced(k, at)
            assert step.finished_at is not None
            at = step.finished_at
        else:
            step = RunStep(
                index=k,
                group=GROUPS[k % 3],
                role="node",
                instance_id=f"i-{k:017x}",
                node_name=f"ip-172-20-{k // 250}-{k % 250}.ec2.internal",
                needs_update="max_age",
            )
        out.append(step)
    groups = [
        GroupSurge(name=g, role="node", min_size=steps // 3, original_desired=steps // 3, original_max=steps // 3)
        for g in GROUPS
    ]
    return Run(
        run_id=KEYS["sk"][4:],
        cluster=CLUSTER,
        options=RunOptions(max_surge=10),
        created_at=T0,
        updated_at=at,
        groups=groups,
        steps=out,
    )
