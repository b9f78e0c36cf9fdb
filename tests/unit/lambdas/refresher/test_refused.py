"""A refused ``RUN#`` save (issue 10): the run pauses with the reason, gives its surge back through the normal pause
path and frees the lock, instead of staying ``running`` for good (moto's Auto Scaling and DynamoDB)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import lambdas.refresher.advance as advance
from adapters.dynamo.runs import RunStore
from core.itemsize import DYNAMODB_ITEM_LIMIT_BYTES
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from tests.unit.adapters.dynamo.aws_item_size import refuse_as_dynamodb
from tests.unit.lambdas.refresher.moto_cluster import RUN_ID, T0, moto_cluster

NO_GUARD = 10 * DYNAMODB_ITEM_LIMIT_BYTES


def run_of(steps: list[RunStep], cancel: bool = False) -> Run:
    return Run(
        run_id=RUN_ID,
        cluster="demo",
        options=RunOptions(max_surge=100),
        created_at=T0,
        updated_at=T0,
        cancel_requested=cancel,
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3, raised=1)],
        steps=steps,
    )


def test_a_save_over_the_guard_pauses_the_run_which_gives_its_surge_back_and_frees_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with moto_cluster(monkeypatch) as cluster:
        deps = cluster.new_deps()
        finished = [
            RunStep(
                index=k,
                group="nodes",
                role="node",
                instance_id=f"i-{k:017x}",
                state=StepState.DONE,
                surge_instance_id=f"i-{k + 10**6:017x}",
                entered={"surging": T0 + timedelta(minutes=k), "done": T0 + timedelta(minutes=k + 1)},
                note=f"{k:06d}".ljust(1000, "."),  # a history of about 90 KB
            )
            for k in range(80)
        ]
        old, *_ = baseline = cluster.instances()
        surging = RunStep(
            index=80, group="nodes", role="node", instance_id=old, state=StepState.SURGING, surge_baseline=baseline
        )
        run = run_of([*finished, surging])
        RunStore(deps.store, guard_bytes=NO_GUARD).create(run)
        deps.runs = RunStore(deps.store, guard_bytes=60_000)  # the guard between the shed and the whole item

        advance.advance_run(deps, None, 5.0, "first")

        final = deps.runs.get(RUN_ID)
        assert final is not None and final.status is RunStatus.PAUSED, final
        assert final.reason.startswith("run record refused (ItemTooLarge"), final.reason
        assert final.history_shed and final.steps[-1].state is StepState.UNDONE
        assert cluster.sizes() == (2, 3)  # the surge given back (never applied: its save was refused first)
        assert (deps.lock.current() or {}).get("holder") is None
        assert "RunRecordRefused:ItemTooLarge" in cluster.telemetry.counted


def test_a_save_dynamodb_refuses_for_its_size_pauses_the_run_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """No guard: the table answers as DynamoDB does (ValidationException, "Item size has exceeded the maximum allowed
    size"; moto itself under-counts lists: ``aws_item_size``). The cancel's pass skips every pending step, which makes
    the item grow past 400 KB (to about 418 KB; moto alone would take it: its count is 404,600)."""
    with moto_cluster(monkeypatch) as cluster:
        deps = cluster.new_deps()
        refuse_as_dynamodb(deps.store.table.meta.client)
        deps.runs = RunStore(deps.store, guard_bytes=NO_GUARD)
        history = RunStep(
            index=0, group="nodes", role="node", instance_id="i-0", state=StepState.DONE, note="x" * 385_000
        )
        pending = [RunStep(index=k, group="nodes", role="node", instance_id=f"i-{k:017x}") for k in range(1, 601)]
        run = run_of([history, *pending], cancel=True)
        assert deps.runs.size(RUN_ID, run.to_item()) < DYNAMODB_ITEM_LIMIT_BYTES  # about 407 KB: written
        deps.runs.create(run)

        out = advance.advance_run(deps, None, 5.0, "first")

        final = deps.runs.get(RUN_ID)
        assert final is not None and final.status is RunStatus.PAUSING and final.version == 2, final
        assert final.reason.startswith("run record refused (ValidationException"), final.reason
        assert all(s.state is StepState.PENDING for s in final.steps[1:])  # nothing of the refused passes written
        assert out["run"]["status"] == "pausing" and (deps.lock.current() or {}).get("holder") is None
        # the pausing run's own save is refused too: counted, and this invocation stops (the next one tries again)
        assert cluster.telemetry.counted.count("RunRecordRefused:ValidationException") == 2
