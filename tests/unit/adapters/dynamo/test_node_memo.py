"""``NodeRecordMemo``: the records of the ``NODE#`` items last read, answered again only for exactly the same values
(a changed, forged or retyped item is validated again; an unreadable one refused on every read), bounded by the
current membership, and judging freshness exactly as ``NodeRecord.confirmed(item, mark).fresh`` did."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from adapters.dynamo.node_memo import FIELDS, NodeRecordMemo
from core.model import NodeRecord, fresh_by_mark

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
MARK = NOW - timedelta(seconds=30)


def item(n: int = 1, **fields: Any) -> dict[str, Any]:
    """A ``NODE#`` item as the table answers it (``expires_at`` a ``Decimal``, the keys included)."""
    iid = f"i-{n:017x}"
    return {
        "pk": "CLUSTER#demo#AGENT",
        "sk": f"NODE#{iid}",
        "instance_id": iid,
        "node_name": f"ip-10-0-0-{n}.ec2.internal",
        "availability_zone": "us-east-1a",
        "asg_name": "nodes-us-east-1a",
        "ready": True,
        "unschedulable": False,
        "roles": ["node"],
        "instance_group": "nodes-us-east-1a",
        "reported_at": (NOW - timedelta(minutes=5)).isoformat(),
        "expires_at": Decimal(1767657660),
        **fields,
    }


def read(memo: NodeRecordMemo, items: list[dict[str, Any]], mark: datetime | None = MARK) -> list[NodeRecord]:
    records, refused = memo.records(items, mark)
    assert not refused, refused
    return records


def test_records_are_the_validated_items_and_an_unchanged_item_is_answered_from_the_memo() -> None:
    memo = NodeRecordMemo()
    items = [item(1), item(2, roles=[], ready=False)]

    first = read(memo, items)
    again = read(memo, [dict(i) for i in items])  # fresh objects, as DynamoDB answers every read

    assert first == [NodeRecord.model_validate(i) for i in items]
    assert [r.confirmed_at for r in first] == [None, None]
    assert all(a is b for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("node_name", "ip-10-0-0-9.ec2.internal"),
        ("ready", False),
        ("roles", ["node", "spot"]),
        ("roles", []),
        ("reported_at", NOW.isoformat()),
        ("asg_name", None),
    ],
)
def test_a_changed_item_is_validated_again(field: str, value: Any) -> None:
    memo = NodeRecordMemo()
    read(memo, [item(1)])

    (record,) = read(memo, [item(1, **{field: value})])

    assert getattr(record, field) == NodeRecord.model_validate(item(1, **{field: value})).__dict__[field]
    assert record == NodeRecord.model_validate(item(1, **{field: value}))


def test_a_field_removed_is_not_the_same_as_one_holding_its_value() -> None:
    memo = NodeRecordMemo()
    read(memo, [item(1, asg_name=None)])
    without = item(1)
    del without["asg_name"]

    (record,) = read(memo, [without])
    assert record.asg_name is None

    _, refused = memo.records([item(1, ready=None)], MARK)  # None where the field had none: not a bool
    assert [r.sk for r in refused] == ["NODE#i-00000000000000001"]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (1, True),  # 1 == True, but pydantic reads 1 as a time and refuses True
        (Decimal(1), True),  # the same as DynamoDB answers a number and a boolean
        (1.0, True),
    ],
)
def test_an_equal_value_of_another_type_is_validated_again_and_refused(first: Any, then: Any) -> None:
    memo = NodeRecordMemo()
    (record,) = read(memo, [item(1, reported_at=first)])
    assert record.reported_at == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)

    records, refused = memo.records([item(1, reported_at=then)], MARK)

    assert records == [] and [r.sk for r in refused] == ["NODE#i-00000000000000001"]


def test_retyped_and_retexted_values_are_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    validated: list[Any] = []
    real = NodeRecord.model_validate.__func__  # type: ignore[attr-defined]  # the classmethod's function

    def counting(cls: type[NodeRecord], obj: Any, *args: Any, **kwargs: Any) -> NodeRecord:
        validated.append(obj)
        return real(cls, obj, *args, **kwargs)  # type: ignore[no-any-return]  # pydantic's own

    monkeypatch.setattr(NodeRecord, "model_validate", classmethod(counting))
    memo = NodeRecordMemo()
    base = item(1, ready=True, reported_at=Decimal("1"))
    read(memo, [base])
    assert len(validated) == 1

    read(memo, [item(1, ready=True, reported_at=Decimal("1"))])  # the same values: not validated
    read(memo, [item(1, ready=True, reported_at=Decimal("1.0"))])  # equal, another text
    read(memo, [item(1, ready=Decimal(1), reported_at=Decimal("1.0"))])  # equal, another type
    read(memo, [item(1, ready=Decimal(1), reported_at=Decimal("1.0"), expires_at=Decimal(5))])  # not a field

    assert len(validated) == 3


def test_an_unreadable_item_is_refused_on_every_read() -> None:
    memo = NodeRecordMemo()
    bad = item(2, reported_at="2026-01-05T11:00:00")  # no time zone: refused
    for _ in range(3):
        records, refused = memo.records([item(1), bad], MARK)
        assert [r.instance_id for r in records] == ["i-00000000000000001"]
        assert [r.sk for r in refused] == ["NODE#i-00000000000000002"]
        assert "timezone" in str(refused[0].error)
    assert len(memo) == 1


def test_an_item_changed_in_place_after_its_read_is_validated_again() -> None:
    memo = NodeRecordMemo()
    mine = item(1, roles=["node"])
    read(memo, [mine])

    mine["roles"].append("spot")  # the caller's own object, changed under the memo
    (record,) = read(memo, [mine])

    assert record.roles == ["node", "spot"]


def test_the_memo_holds_only_the_last_reads_items() -> None:
    memo = NodeRecordMemo()
    read(memo, [item(n) for n in range(1, 6)])
    assert len(memo) == 5

    read(memo, [item(3)])
    assert len(memo) == 1

    read(memo, [])
    assert len(memo) == 0


def test_an_item_carrying_confirmed_at_is_read_as_before_and_not_kept() -> None:
    memo = NodeRecordMemo()
    forged = item(1, confirmed_at="garbage")

    (record,) = read(memo, [forged], MARK)  # the mark's time replaces it, as ``NodeRecord.confirmed`` does
    assert record == NodeRecord.confirmed(forged, MARK) and record.confirmed_at == MARK
    _, refused = memo.records([forged], None)  # no mark: its own value is read, and it is not a time
    assert [r.sk for r in refused] == ["NODE#i-00000000000000001"]
    assert len(memo) == 0


@pytest.mark.parametrize("own_age", [0, 299, 301, 3600])
@pytest.mark.parametrize("mark_age", [None, -60, 0, 300, 301, 3600])
def test_freshness_by_the_mark_or_the_record_is_that_of_the_record_confirmed_by_the_mark(
    own_age: int, mark_age: int | None
) -> None:
    mark = None if mark_age is None else NOW - timedelta(seconds=mark_age)
    node = item(1, reported_at=(NOW - timedelta(seconds=own_age)).isoformat())

    (record,) = read(NodeRecordMemo(), [node], mark)

    expected = NodeRecord.confirmed(node, mark).fresh(NOW, 300)
    assert (fresh_by_mark(mark, NOW, 300) or record.fresh(NOW, 300)) == expected


def test_the_record_reads_nothing_but_its_own_fields() -> None:
    # the memo compares only ``FIELDS``: that is exact only while NodeRecord ignores other attributes, reads every
    # field under its own name and has no model validator that could look at the rest of the item
    assert NodeRecord.model_config.get("extra") == "ignore"
    assert all(f.alias is None and f.validation_alias is None for f in NodeRecord.model_fields.values())
    assert not NodeRecord.__pydantic_decorators__.model_validators
    assert set(FIELDS) == set(NodeRecord.model_fields) - {"confirmed_at"}


class Role(str):
    """A string subclass: equal to the plain string, not of its type."""


def test_a_list_element_equal_but_of_another_type_is_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The roles list is compared by its elements' types at once (a list of plain values): an element retyped to an
    equal value of another type is not taken for the one the record was validated from."""
    validated: list[Any] = []
    real = NodeRecord.model_validate.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        NodeRecord, "model_validate", classmethod(lambda cls, obj: validated.append(obj) or real(cls, obj))
    )
    memo = NodeRecordMemo()
    read(memo, [item(1, roles=["node", "spot"])])
    read(memo, [item(1, roles=["node", "spot"])])
    assert len(validated) == 1  # the same list: answered from the memo
    read(memo, [item(1, roles=["node", Role("spot")])])
    assert len(validated) == 2
    _, refused = memo.records([item(1, roles=[["node"]])], MARK)  # a nested list: refused, as validated
    assert len(validated) == 3 and [r.sk for r in refused] == ["NODE#i-00000000000000001"]
