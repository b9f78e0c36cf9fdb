"""An operator's cancel whose ``RUN#`` save is refused (the run's item no longer fits): the CLI says so and exits 1,
and the cancel is not lost (the run records the refusal, ``cancel_requested``, and ends ``cancelled``). The CLI
invokes the refresher's own handler over moto (``moto_cluster``)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.dynamo.runs import RunStore
from cli.main import main
from core.itemsize import DYNAMODB_ITEM_LIMIT_BYTES
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from lambdas.refresher.handler import handle
from tests.unit.lambdas.refresher.moto_cluster import RUN_ID, T0, moto_cluster

GUARD = 50_000  # the stored item (about 61 KB, written without a guard) is over it; shed (no notes) it is far under


def big_run() -> Run:
    """A running run: one step done with a 60 KB note (its history), one pending."""
    return Run(
        run_id=RUN_ID,
        cluster="demo",
        options=RunOptions(max_surge=1),
        created_at=T0,
        updated_at=T0,
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3)],
        steps=[
            RunStep(index=0, group="nodes", role="node", instance_id="i-0", state=StepState.DONE, note="x" * 60_000),
            RunStep(index=1, group="nodes", role="node", instance_id="i-1"),
        ],
    )


def cancel(deps: Any, *args: str) -> tuple[int, list[str], list[dict[str, Any]]]:
    out: list[str] = []
    answers: list[dict[str, Any]] = []

    def invoker(payload: dict[str, Any]) -> dict[str, Any]:
        answers.append(handle(payload, deps))
        return answers[-1]

    code = main(
        ["--function-name", "fn", "--cluster", "demo", "cancel", *args], environ={}, invoker=invoker, out=out.append
    )
    return code, out, answers


@pytest.mark.parametrize("by_id", [False, True])
def test_a_refused_cancel_prints_the_refusal_exits_1_and_the_run_is_cancelled_anyway(
    monkeypatch: pytest.MonkeyPatch, by_id: bool
) -> None:
    with moto_cluster(monkeypatch) as cluster:
        deps = cluster.new_deps()
        RunStore(deps.store, guard_bytes=10 * DYNAMODB_ITEM_LIMIT_BYTES).create(big_run())
        deps.runs = RunStore(deps.store, guard_bytes=GUARD)

        code, out, answers = cancel(deps, *(["--run-id", RUN_ID] if by_id else []))

        text = "\n".join(out)
        assert code == 1, text
        assert "status: cancel_requested" in text
        assert "refusal: run record refused (ItemTooLarge (" in text and "bytes)): cancelling" in text
        assert answers[0]["refusal"].startswith("run record refused (ItemTooLarge")
        final = deps.runs.get(RUN_ID)
        assert final is not None and final.cancel_requested, final
        assert final.status is RunStatus.CANCELLED, final  # the cancel was not lost: its undo passes ran, shed
        assert final.reason.startswith("run record refused (ItemTooLarge"), final.reason
        assert final.history_shed and final.steps[1].state is StepState.SKIPPED
        assert "RunRecordRefused:ItemTooLarge" in cluster.telemetry.counted
        assert (deps.lock.current() or {}).get("holder") is None


def test_a_cancel_that_fits_exits_0_without_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_cluster(monkeypatch) as cluster:
        deps = cluster.new_deps()
        deps.runs.create(big_run())

        code, out, answers = cancel(deps)

        assert code == 0 and "refusal" not in "\n".join(out) and "refusal" not in answers[0]
        final = deps.runs.get(RUN_ID)
        assert final is not None and final.status is RunStatus.CANCELLED and final.reason == "cancelled by an operator"
        assert not final.history_shed
        assert not any(c.startswith("RunRecordRefused") for c in cluster.telemetry.counted)
