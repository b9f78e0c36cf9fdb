"""A weekly refresh of three worker groups as its ``RUN#`` record holds it (``weekly_refresh``: the first steps
replaced, as the refresher leaves a ``done`` step, ``replaced``; the rest pending), and the item's keys: shared by the
run record's tests (``test_runrecord``, ``test_rowcache``, ``test_runrecord_memo``, ``test_rowread_order``). The
steps, keys and groups are ``bench.run_item``'s, whose sizes BENCHMARKS.md reports."""

from __future__ import annotations

from datetime import datetime

from bench.run_item import CLUSTER, GROUPS, KEYS, T0, step
from core.runs import GroupSurge, Run, RunOptions, RunStep

RUN_ID = KEYS["sk"].removeprefix("RUN#")
ITEM_BUDGET = 300 * 1024  # a run of 2,100 finished steps stays under this (DynamoDB's cap is 400 KB)


def replaced(index: int, at: datetime) -> RunStep:
    """A worker step as the refresher leaves it ``done``: spare Ready, drained, terminated (times to the us), its
    replacement started at ``at`` (``bench.run_item.step``, the benchmark's same step)."""
    return step(index, at)


def weekly_refresh(steps: int, finished: int) -> Run:
    """3 worker groups, ``steps`` instances, the first ``finished`` of them replaced, the rest pending."""
    out, at = [], T0
    for k in range(steps):
        if k < finished:
            step_k = replaced(k, at)
            assert step_k.finished_at is not None
            at = step_k.finished_at
        else:
            step_k = step(k, None)
        out.append(step_k)
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
