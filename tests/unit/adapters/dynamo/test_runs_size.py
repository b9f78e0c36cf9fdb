"""``RUN#`` items and DynamoDB's 400 KB item size (moto's DynamoDB): the guard before the call, DynamoDB's own
refusal, the shed save of a stopping run, and the small write that records a refusal."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from adapters.dynamo.runs import RunStore
from adapters.dynamo.store import Store
from adapters.dynamo.table import translate_fenced
from core.exceptions import AwsRequestError, RunConflictError, RunRecordRefusedError
from core.itemsize import DYNAMODB_ITEM_LIMIT_BYTES
from core.lock import Lease
from core.runlimits import RUN_ITEM_GUARD_BYTES
from core.runs import GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState
from tests.unit.adapters.dynamo.aws_item_size import TOO_LARGE, refuse_as_dynamodb

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
RUN_ID = "20240305T100000Z-abcdef"
NO_GUARD = 10 * DYNAMODB_ITEM_LIMIT_BYTES


def run_with_history(finished: int, note_chars: int = 1000, status: RunStatus = RunStatus.RUNNING) -> Run:
    """One group, one step draining and ``finished`` steps done, each with a note of its own (``note_chars``
    characters: about that many bytes a step, strings counted alike by DynamoDB, moto and ``core.itemsize``)."""
    steps = [
        RunStep(
            index=k,
            group="nodes",
            role="node",
            instance_id=f"i-{k:017x}",
            state=StepState.DONE,
            surge_instance_id=f"i-{k + 10**6:017x}",
            started_at=T0 + timedelta(minutes=k),
            finished_at=T0 + timedelta(minutes=k + 1),
            entered={"surging": T0 + timedelta(minutes=k), "done": T0 + timedelta(minutes=k + 1)},
            note=f"{k:06d}".ljust(note_chars, "."),
        )
        for k in range(finished)
    ]
    steps.append(RunStep(index=finished, group="nodes", role="node", instance_id="i-old", state=StepState.DRAINING))
    return Run(
        run_id=RUN_ID,
        cluster="demo",
        status=status,
        options=RunOptions(),
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3, raised=1)],
        steps=steps,
        created_at=T0,
        updated_at=T0,
    )


def calls(store: Store) -> Counter[str]:
    counted: Counter[str] = Counter()
    store.table.meta.client.meta.events.register("before-call", lambda model, **_: counted.update([model.name]))
    return counted


def test_moto_refuses_an_item_over_400_kb_as_dynamodb_does_and_the_save_says_so(store: Store) -> None:
    runs = RunStore(store, guard_bytes=NO_GUARD)
    small = run_with_history(350)  # about 380 KB: written
    assert 370_000 < runs.size(RUN_ID, small.to_item()) < DYNAMODB_ITEM_LIMIT_BYTES
    runs.create(small)
    big = run_with_history(420)  # about 460 KB
    assert runs.size(RUN_ID, big.to_item()) > DYNAMODB_ITEM_LIMIT_BYTES
    with pytest.raises(AwsRequestError) as refused:  # the table as DynamoDB: ValidationException, not retryable
        store.put(f"RUN#{RUN_ID}", big.to_item())
    assert (refused.value.code, TOO_LARGE in str(refused.value)) == ("ValidationException", True)
    stored = runs.get(RUN_ID)
    assert stored is not None
    with pytest.raises(RunRecordRefusedError) as err:
        runs.save(big.model_copy(update={"version": stored.version}))
    assert err.value.code == "ValidationException" and TOO_LARGE in str(err.value)
    assert err.value.size is not None and err.value.size > DYNAMODB_ITEM_LIMIT_BYTES
    lease = Lease("refresher:x", "refresh", 1, 0.0)
    store.put("LOCK", {"holder": lease.holder, "operation": "refresh", "fencing": 1})
    with pytest.raises(RunRecordRefusedError):  # fenced (a transaction): refused the same way, nothing written
        runs.save(big.model_copy(update={"version": stored.version}), fence=lease)
    assert runs.get(RUN_ID) == stored


def test_moto_accepts_a_row_heavy_item_dynamodb_refuses_so_the_tests_make_it_answer_as_dynamodb(store: Store) -> None:
    pending = [
        RunStep(index=k, group="nodes", role="node", instance_id=f"i-{k:017x}", node_name=f"{k:06d}".ljust(400, "n"))
        for k in range(945)
    ]
    rows = run_with_history(0).model_copy(update={"steps": pending})
    runs = RunStore(store, guard_bytes=NO_GUARD)
    assert runs.size(RUN_ID, rows.to_item()) > DYNAMODB_ITEM_LIMIT_BYTES  # DynamoDB's count
    runs.create(rows)  # 411,393 bytes; moto's count (no list overheads, numbers as characters) is 401,020
    refuse_as_dynamodb(store.table.meta.client)
    with pytest.raises(RunRecordRefusedError) as err:
        runs.save(rows)
    assert err.value.code == "ValidationException" and TOO_LARGE in str(err.value)
    store.delete(f"RUN#{RUN_ID}")
    runs.create(run_with_history(10))  # a small item still passes


def test_a_save_over_the_guard_is_not_attempted(store: Store) -> None:
    runs = RunStore(store)
    runs.create(run_with_history(10))
    before = runs.get(RUN_ID)
    assert before is not None
    big = run_with_history(370).model_copy(update={"version": before.version})  # over 380 KB, under 400 KB
    assert RUN_ITEM_GUARD_BYTES < runs.size(RUN_ID, big.to_item()) < DYNAMODB_ITEM_LIMIT_BYTES
    counted = calls(store)
    with pytest.raises(RunRecordRefusedError) as err:
        runs.save(big)
    assert err.value.code == "ItemTooLarge" and err.value.limit == RUN_ITEM_GUARD_BYTES
    assert err.value.size is not None and err.value.size > RUN_ITEM_GUARD_BYTES
    assert not counted  # no call made
    assert runs.get(RUN_ID) == before


def test_a_stopping_run_over_the_guard_is_saved_shed(store: Store) -> None:
    runs = RunStore(store)
    runs.create(run_with_history(10))
    stopping = run_with_history(370, status=RunStatus.PAUSING).model_copy(update={"version": 0})
    with pytest.raises(RunRecordRefusedError):  # the same state running: refused
        runs.save(stopping.model_copy(update={"status": RunStatus.RUNNING}))
    runs.save(stopping)
    back = runs.get(RUN_ID)
    assert back is not None and back.history_shed and back.version == 1
    assert [(s.instance_id, s.state, s.surge_instance_id) for s in back.steps] == [
        (s.instance_id, s.state, s.surge_instance_id) for s in stopping.steps
    ]
    assert back.steps[0].note == "" and back.steps[-1] == stopping.steps[-1]  # the step in flight kept whole


def test_a_refusal_is_recorded_by_a_small_write_that_pauses_the_run(store: Store) -> None:
    runs = RunStore(store)
    runs.create(run_with_history(300))
    stored = runs.get(RUN_ID)
    assert stored is not None
    now = T0 + timedelta(hours=1)
    paused = runs.record_refusal(stored, "run record refused (ItemTooLarge)", now)
    back = runs.get(RUN_ID)
    assert back == paused
    assert (back.status, back.reason, back.version, back.updated_at) == (
        RunStatus.PAUSING,
        "run record refused (ItemTooLarge)",
        1,
        now,
    )
    assert back.steps == stored.steps  # the rest of the item as it was
    with pytest.raises(RunConflictError):  # conditioned on the version read
        runs.record_refusal(stored, "again", now)
    runs.record_refusal(back, "again", now)  # already stopping: keeps its status, the reason appended
    again = runs.get(RUN_ID)
    assert again is not None and again.status is RunStatus.PAUSING
    assert again.reason == "run record refused (ItemTooLarge); again"


def test_a_transaction_cancelled_for_an_invalid_write_is_named_a_validation_error() -> None:
    # TransactWriteItems: "An item size becomes too large (larger than 400 KB) ... or a similar validation error
    # occurs because of changes made by the transaction" cancels it, reason code ValidationError (API reference)
    err = ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": [{"Code": "None"}, {"Code": "ValidationError", "Message": TOO_LARGE}],
        },
        "TransactWriteItems",
    )
    translated = translate_fenced(err, "put RUN#r", RunConflictError, Lease("h", "refresh", 1, 0.0))
    assert isinstance(translated, AwsRequestError) and translated.code == "ValidationError"
    assert TOO_LARGE in str(translated)
