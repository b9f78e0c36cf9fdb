"""``core.runrecord``'s memos: a row is worked out once for what it holds, and what a pass packs or reads is what it
was without them: the same words in the same order, a step changed in place packed as it is now, each read its own
steps but the final ones (shared), bad rows refused as before."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.dynamo.runs import AS_IS
from adapters.dynamo.table import dynamo, plain
from adapters.dynamo.values import plain_item
from core import rowread, runrecord
from core.runs import Run, StepState
from tests.unit.core.weekly_run import RUN_ID, replaced, weekly_refresh


def read(item: dict[str, Any]) -> Run:
    return Run.model_validate(plain(dynamo(item)))


def test_words_are_numbered_in_the_order_a_row_names_them() -> None:
    # needs_update, then the drain's status, the state, the note and the times' keys: the order the item has always
    # had (a memo hit and a miss alike), so an item written now is the one written before
    run = weekly_refresh(3, 2)
    for _ in range(2):
        item = run.to_item()
        assert item["words"] == [
            "max_age",
            "succeeded",
            "done",
            "replaced",
            "@started surging draining @spare_ready terminating done @finished",
        ]
        assert item["rows"][0][4:10] == [0, 2, f"i-{10**6:017x}", 1, 3, 4]


def test_a_final_step_changed_in_place_is_packed_as_it_is_now() -> None:
    run = weekly_refresh(6, 4)
    first = run.to_item()
    run.steps[1].note = "kept on purpose"
    run.steps[2].entered["done"] = run.steps[2].entered["done"].replace(microsecond=7)
    run.steps[3].role = "control-plane"  # not its group's role: a map
    again = run.to_item()
    assert again != first
    assert read(again) == run.at_rest()
    assert [s["index"] for s in again["steps"]] == [3]


def test_reads_share_steps_at_rest() -> None:
    # steps at rest are never changed in place (a decision changes only steps its pass starts with in flight, and
    # copies a pending one first: ``Context.own``, test_final_steps.py), so reads of a row made before share them
    run = weekly_refresh(9, 6)
    item = run.to_item()
    one, two, three = read(item), read(item), read(item)
    assert one == two == three == run.at_rest()
    final = [i for i, s in enumerate(three.steps) if s.state.final]
    assert final == list(range(6))
    assert all(two.steps[i] is three.steps[i] for i in range(9))
    assert all(three.steps[i].state is StepState.PENDING for i in range(6, 9))


def test_reads_each_have_their_own_step_in_flight() -> None:
    run = weekly_refresh(9, 6)
    run.steps[6] = run.steps[6].model_copy(update={"state": StepState.SURGING})
    item = run.to_item()
    two, three = read(item), read(item)
    assert two.steps[6] is not three.steps[6] and two.steps[6] == three.steps[6]
    two.steps[6].waiting_since["spare_ready"] = run.created_at
    two.steps[6].entered["surging"] = run.created_at
    assert read(item) == three == run.at_rest()


def test_a_read_with_the_memo_gives_what_validation_alone_gives() -> None:
    run = weekly_refresh(30, 20)
    item = plain(dynamo(run.to_item()))
    validated = Run.model_validate(rowread.unpack(item))  # every step map validated by the model, no memo
    for _ in range(2):
        got = Run.model_validate(item)
        assert got == validated == run.at_rest()
        assert [s.model_fields_set for s in got.steps] == [s.model_fields_set for s in validated.steps]


@pytest.mark.parametrize(("slot", "bad"), [(3, 1), (2, 5), (6, 7), (2, ["i-0"]), (6, {"id": "i-0"})])
def test_a_bad_row_is_refused_after_a_good_one_was_read(slot: int, bad: Any) -> None:
    run = weekly_refresh(3, 3)
    for step in run.steps:
        step.node_name = step.instance_id  # kOps' resource-based names: the row says True
    item = plain(dynamo(run.to_item()))
    assert item["rows"][0][3] is True
    read(item)  # its rows memoised
    item["rows"][0][slot] = bad  # a 1 where the row said True (the node name is the instance id), an int id, a list
    with pytest.raises(ValidationError):
        Run.model_validate(item)


def test_the_memos_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runrecord, "MEMO_ROWS", 5)
    monkeypatch.setattr(rowread, "MEMO_ROWS", 5)
    monkeypatch.setattr(runrecord, "_PACKED", {})  # not what earlier tests left (they may hold these rows already)
    monkeypatch.setattr(rowread, "_READ", {})
    for k in range(12):
        step = replaced(k, weekly_refresh(1, 0).created_at)
        runrecord.pack([step], weekly_refresh(3, 0).groups, step.started_at or step.finished_at, run_id=RUN_ID)
        read(weekly_refresh(k + 3, k + 1).to_item())
    assert len(runrecord._PACKED) <= 5
    assert len(rowread._READ) <= rowread.MEMO_RUNS
    assert all(len(rows) <= 5 for rows in rowread._READ.values())


def test_a_row_is_made_the_second_time_it_is_read_and_copied_after() -> None:
    item = plain(dynamo(weekly_refresh(6, 4).to_item()))
    made: list[dict[str, Any]] = []

    def make(fields: dict[str, Any]) -> dict[str, Any]:
        made.append(fields)
        return dict(fields)

    first = rowread.unpack(item, make, dict)
    assert made == []  # read once: maps, as without the memo (a run read once costs nothing more)
    second = rowread.unpack(item, make, dict)
    assert len(made) == 6 and second["steps"] == first["steps"]
    third = rowread.unpack(item, make, dict)
    assert len(made) == 6 and third["steps"] == first["steps"]
    assert all(a is not b for a, b in zip(second["steps"], third["steps"], strict=True))


def answered(value: Any) -> Any:
    """``value`` as boto3's resource layer answers it: every number a ``Decimal`` ("Boto3 DynamoDB types")."""
    if isinstance(value, dict):
        return {k: answered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [answered(v) for v in value]
    return Decimal(value) if type(value) is int else value


@pytest.mark.parametrize("first", ["plain", "answered"])
def test_rows_read_as_the_table_answers_them_read_as_converted_ones(first: str) -> None:
    # the readers leave a RUN# item's rows as answered (``plain_item``): unpack reads their numbers with int(), and a
    # row's memo is the same for both forms, whichever came first
    run = weekly_refresh(12, 7)
    run.steps[8] = run.steps[8].model_copy(update={"state": StepState.SURGING})
    stored = answered(dynamo(run.to_item()))
    assert type(stored["rows"][0][0]) is Decimal
    converted, raw = plain(stored), plain_item(stored, AS_IS)
    assert raw["rows"] is stored["rows"] and type(raw["version"]) is int
    order = [converted, raw] if first == "plain" else [raw, converted]
    for item in order * 2:
        got = Run.model_validate(item)
        assert got == run.at_rest()
        assert Run.model_validate(rowread.unpack(item)) == got  # every map validated, no memo


@pytest.mark.parametrize(("slot", "bad"), [(3, Decimal(1)), (2, Decimal(5)), (6, Decimal(7))])
def test_a_bad_number_in_an_answered_row_is_refused(slot: int, bad: Any) -> None:
    run = weekly_refresh(3, 3)
    for step in run.steps:
        step.node_name = step.instance_id
    stored = answered(dynamo(run.to_item()))
    Run.model_validate(plain_item(stored, AS_IS))  # its rows memoised
    stored["rows"][0][slot] = bad  # a number where the row holds True, an instance id, a spare's id
    with pytest.raises(ValidationError):
        Run.model_validate(plain_item(stored, AS_IS))


@pytest.mark.parametrize("answered", [False, True])
def test_a_read_after_some_rows_changed_gives_what_validation_alone_gives(answered: bool) -> None:
    # a read hands out again the steps of the rows equal to the last read's at their places (``rowread._again``): the
    # rows that changed since, by content or only by the node name flag, are read anew
    run = weekly_refresh(8, 3)
    for step in run.steps[:2]:
        step.node_name = step.instance_id  # the row says True
    convert = (lambda item: plain_item(answered_item(item), AS_IS)) if answered else (lambda item: plain(dynamo(item)))
    for _ in range(3):  # read once (maps), made, handed out again
        assert Run.model_validate(convert(run.to_item())) == run.at_rest()
    run.steps[4] = replaced(4, run.created_at)  # pending -> done
    run.steps[0].node_name = "ip-10-0-0-1.ec2.internal"  # True -> a name
    run.steps[6].note = "changed"
    item = convert(run.to_item())
    got = Run.model_validate(item)
    assert got == Run.model_validate(rowread.unpack(item)) == run.at_rest()
    assert got.steps[0].node_name == "ip-10-0-0-1.ec2.internal" and got.steps[4].state is StepState.DONE


def answered_item(item: dict[str, Any]) -> Any:
    return answered(dynamo(item))
