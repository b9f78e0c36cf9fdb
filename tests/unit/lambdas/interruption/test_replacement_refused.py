"""A replacement run whose ``RUN#`` save is refused (too large, or invalid as DynamoDB answers it): the executor
answers it as a refused replacement, never a started one, raises nothing (no crash loop: the redelivered event would
be refused the same way), counts it, pauses a joined run with the reason, and keeps the rebalance cordon (moto's
DynamoDB)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import lambdas.interruption.replacement as replacement
from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from core.itemsize import DYNAMODB_ITEM_LIMIT_BYTES
from core.runs import RunStatus, RunStep
from lambdas.interruption.decide import Plan
from lambdas.interruption.execute import Effects, execute
from lambdas.interruption.plan import JoinReplacement, RecordCommand, SendCommand, StartReplacement
from tests.unit.adapters.dynamo.aws_item_size import refuse_as_dynamodb
from tests.unit.lambdas.interruption.effects_world import NOW, messages
from tests.unit.lambdas.interruption.replacement_world import GROUP, VICTIM, cordon, run
from tests.unit.lambdas.refresher.moto_cluster import Counting

NO_GUARD = 10 * DYNAMODB_ITEM_LIMIT_BYTES
HUGE = "x" * 395_000  # a note that makes the item larger than the guard (380 KB) and DynamoDB's 400 KB


def counting(effects: Effects) -> tuple[Effects, Counting]:
    telemetry = Counting()
    return replace(effects, telemetry=telemetry), telemetry


def with_cordon(action: StartReplacement | JoinReplacement) -> Plan:
    return Plan((action, RecordCommand(cordon(VICTIM)), SendCommand(cordon(VICTIM))))


def test_a_start_refused_for_its_size_is_not_a_started_replacement_and_the_cordon_stays(effects: Effects) -> None:
    effects, telemetry = counting(effects)
    big = run()
    big = big.model_copy(update={"steps": [big.steps[0].model_copy(update={"note": HUGE})]})

    results = execute(with_cordon(StartReplacement(big)), effects, NOW)

    assert results[0]["result"].startswith("refused: run record refused (ItemTooLarge ("), results[0]
    assert "not started; the cordon stays" in results[0]["result"]
    assert "ReplacementsStarted" not in telemetry.counted
    assert "ReplacementsRefused:run_record_refused" in telemetry.counted
    assert "RunRecordRefused:ItemTooLarge" in telemetry.counted
    assert RunStore(effects.store).list() == []  # nothing written
    assert (LeaseLock(effects.store).current() or {}).get("holder") is None  # the lock given back
    assert effects.store.get_command("rebalance-ev") is not None and len(messages(effects)) == 1  # the cordon


def test_a_start_dynamodb_refuses_is_answered_the_same_way(effects: Effects, monkeypatch: pytest.MonkeyPatch) -> None:
    """No guard: the table answers as DynamoDB does (ValidationException for an item over 400 KB)."""
    effects, telemetry = counting(effects)
    refuse_as_dynamodb(effects.store.table.meta.client)
    monkeypatch.setattr(replacement, "RunStore", lambda store: RunStore(store, guard_bytes=NO_GUARD))
    big = run()
    big = big.model_copy(update={"steps": [big.steps[0].model_copy(update={"note": "x" * 410_000})]})

    results = execute(Plan((StartReplacement(big),)), effects, NOW)

    assert results[0]["result"].startswith("refused: run record refused (ValidationException"), results[0]
    assert "ReplacementsStarted" not in telemetry.counted
    assert "RunRecordRefused:ValidationException" in telemetry.counted
    assert RunStore(effects.store).list() == []


def test_a_join_refused_pauses_the_run_with_the_reason_and_is_counted_refused(effects: Effects) -> None:
    effects, telemetry = counting(effects)
    RunStore(effects.store).create(run())
    step = RunStep(index=0, group=GROUP.name, role="node", instance_id="i-2", note=HUGE)

    results = execute(with_cordon(JoinReplacement(run().run_id, step, None, 5)), effects, NOW)

    result = results[0]["result"]
    assert result.startswith("refused: run record refused (ItemTooLarge (") and "not joined" in result, result
    stored = RunStore(effects.store).get(run().run_id)
    assert stored is not None and stored.status is RunStatus.PAUSING, stored
    assert stored.reason.startswith("run record refused (ItemTooLarge (") and "pausing" in stored.reason
    assert [s.instance_id for s in stored.steps] == ["i-1"]  # the step was not added
    assert "ReplacementsStarted" not in telemetry.counted
    assert "ReplacementsRefused:run_record_refused" in telemetry.counted
    assert "RunRecordRefused:ItemTooLarge" in telemetry.counted
    assert (LeaseLock(effects.store).current() or {}).get("holder") is None  # the lock given back
    assert effects.store.get_command("rebalance-ev") is not None and len(messages(effects)) == 1
