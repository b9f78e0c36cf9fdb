"""``sim.values.value_bytes``/``item_bytes``: DynamoDB's item size rule ("Item sizes and formats"), with numbers'
sizes memoised by value (a pure memo: the same answer as counting, whatever was counted before)."""

from collections.abc import Iterator
from decimal import Context, Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import Binary
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from core.schema import state_table
from sim import values, values_size
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel
from sim.values import item_bytes, value_bytes


def counted(number: Decimal) -> int:
    return (len(number.normalize(Context(prec=38)).as_tuple().digits) + 1) // 2 + 1


def test_sizes_follow_dynamodb_s_rule() -> None:
    assert value_bytes("abc") == 3 and value_bytes("é") == 2 and value_bytes(True) == 1 and value_bytes(None) == 1
    assert value_bytes(Binary(b"\x00\x01")) == 2
    assert value_bytes(Decimal("12345")) == 4 and value_bytes(Decimal("0.5")) == 2
    assert value_bytes(["a", Decimal(7)]) == 3 + (1 + 1) + (1 + 2)
    assert value_bytes({"k": "vv", "é": True}) == 3 + (1 + 1 + 2) + (1 + 2 + 1)
    assert value_bytes({"s", "tt"}) == 3
    assert item_bytes({"pk": "CLUSTER#c", "n": Decimal(12345)}) == 2 + 9 + 1 + 4


def test_a_number_s_size_is_the_same_memoised_or_counted() -> None:
    numbers = [Decimal(n) / Decimal(d) for n in range(-50, 2000, 7) for d in (1, 10, 8)]
    numbers += [Decimal("1.0"), Decimal("1"), Decimal("100"), Decimal("1E+2"), Decimal("1234567890123456789")]
    values._NUMBER_BYTES.clear()
    first = [value_bytes(n) for n in numbers]
    assert first == [counted(n) for n in numbers]
    assert [value_bytes(n) for n in reversed(numbers)] == list(reversed(first))  # memoised: the same answers
    assert value_bytes(Decimal("1.0")) == value_bytes(Decimal("1")) == 2
    assert len(values._NUMBER_BYTES) <= values._NUMBERS_KEPT


def test_a_row_s_canonical_values_and_size_are_its_own_remembered_or_not() -> None:
    # ``True``, ``1`` and ``Decimal(1)`` are equal in Python (and hash alike); DynamoDB stores BOOL and N apart
    first = values.canonical([["i-1", True, 7]])
    second = values.canonical([["i-1", Decimal(1), 7]])
    assert [type(v) for v in first[0]] == [str, bool, Decimal]
    assert [type(v) for v in second[0]] == [str, Decimal, Decimal]
    assert value_bytes(first) == 3 + 1 + (3 + (1 + 3) + (1 + 1) + (1 + 2))
    assert value_bytes(second) == 3 + 1 + (3 + (1 + 3) + (1 + 2) + (1 + 2))
    again = values.canonical([["i-1", True, 7]])
    assert again == first and again[0] is not first[0]  # a new list: the table may change its stored one
    again[0].append("x")
    assert values.canonical([["i-1", True, 7]]) == [["i-1", True, Decimal(7)]]
    try:  # a float in a row is refused as boto3 refuses it, remembered rows or not
        values.canonical([["i-1", 1.5]])
    except TypeError:
        pass
    else:
        raise AssertionError("a float was accepted")


def test_a_put_s_item_is_canonicalised_and_sized_as_separately_remembered_or_not() -> None:
    items = [
        {"pk": "p", "rows": [["i-1", True, 7, None], ["i-1", 1, 7, None], [Decimal("7.50"), [1, {"m": 2}]]]},
        {"pk": "p", "rows": [["i-1", Decimal(1), 7, None]], "words": ["a", "é"], "n": 5, "m": {"x": [1, True]}},
        {"pk": "p", "l": [1, "a", [2, "b"], {"k": [3]}], "s": {"a", "b"}, "b": Binary(b"xy")},
    ]
    for _ in range(2):  # then from the memo
        for item in items:
            stored, size = values_size.sized_canonical_item(item)
            assert stored == values.canonical_item(item)
            assert [list(map(type, r)) for r in stored.get("rows", [])] == [
                list(map(type, r)) for r in values.canonical_item(item).get("rows", [])
            ]
            assert size == item_bytes(values.canonical_item(item))
    first, _ = values_size.sized_canonical_item(items[0])
    again, _ = values_size.sized_canonical_item(items[0])
    assert first["rows"][0] is not again["rows"][0]  # rows with a Decimal: made anew each write


_SCALARS = st.one_of(
    st.text(max_size=6),
    st.integers(-(10**20), 10**20),
    st.booleans(),
    st.none(),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6),
)
_MAPS = st.dictionaries(st.sampled_from(["seq", "sk", "n", "é"]), _SCALARS, max_size=3)


@given(st.lists(st.lists(st.one_of(_MAPS, _SCALARS), max_size=5), min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_maps_in_a_list_are_canonicalised_and_sized_as_counted_remembered_or_not(lists: list[list[Any]]) -> None:
    # the MEMBERSHIP mark's ``changes`` (maps of scalars in a list) are remembered by content (``_sized_map``);
    # ``True``, ``1`` and ``Decimal(1)`` are equal in Python and must not share an entry
    for _ in range(2):  # the second from the memo
        for value in lists:
            item = {"pk": "p", "l": value}
            stored, size = values_size.sized_canonical_item(item)
            plain = values.canonical_item(item)
            assert stored == plain and size == item_bytes(plain)
            assert [type(v) for v in stored["l"]] == [type(v) for v in plain["l"]]
            for got, want in zip(stored["l"], plain["l"], strict=True):
                if type(want) is dict:
                    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
                    assert list(got) == list(want)
    item = {"pk": "p", "l": [{"seq": 1, "sk": "NODE#i-1"}]}
    first, _ = values_size.sized_canonical_item(item)
    again, _ = values_size.sized_canonical_item(item)
    assert first["l"][0] == again["l"][0] and first["l"][0] is not again["l"][0]  # each write its own maps
    flag, _ = values_size.sized_canonical_item({"pk": "p", "l": [{"seq": True, "sk": "NODE#i-1"}]})
    assert type(flag["l"][0]["seq"]) is bool and type(first["l"][0]["seq"]) is Decimal


@given(st.dictionaries(st.sampled_from(["pk", "sk", "n", "é", "ready", "roles"]), _SCALARS, min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_an_item_s_scalars_are_canonicalised_and_sized_as_counted(item: dict[str, Any]) -> None:
    # strings, booleans and None are kept as they are and sized in place (``sized_canonical_item``'s own branches)
    stored, size = values_size.sized_canonical_item(item)
    plain = values.canonical_item(item)
    assert stored == plain and size == item_bytes(plain)
    assert [type(v) for v in stored.values()] == [type(v) for v in plain.values()]


_LISTS = st.lists(st.one_of(st.text(max_size=4), st.text(max_size=4), _SCALARS), max_size=4)


@given(
    st.lists(
        st.dictionaries(st.sampled_from(["sk", "é", "baseline", "entered"]), st.one_of(_LISTS, _SCALARS, _MAPS)),
        max_size=3,
    )
)
@settings(max_examples=300, deadline=None)
def test_maps_holding_lists_of_strings_are_canonicalised_and_sized_as_counted(maps: list[dict[str, Any]]) -> None:
    # a step in flight's map holds its ``surge_baseline`` (a list of strings), sized in C by ``_sized_map``, and
    # maps (``entered``); a list whose first map holds either is sized one map at a time (``_sized_maps``)
    item = {"pk": "p", "l": maps}
    stored, size = values_size.sized_canonical_item(item)
    plain = values.canonical_item(item)
    assert stored == plain and size == item_bytes(plain)
    for got, want in zip(stored["l"], plain["l"], strict=True):
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
        for field, plain_field in zip(got.values(), want.values(), strict=True):
            if type(field) is list:
                assert [type(v) for v in field] == [type(v) for v in plain_field]
    baseline = ["i-1", "i-é"]
    first, _ = values_size.sized_canonical_item({"pk": "p", "l": [{"surge_baseline": baseline}]})
    assert first["l"][0]["surge_baseline"] == baseline and first["l"][0]["surge_baseline"] is not baseline


def test_rows_all_remembered_are_canonicalised_and_sized_as_one_by_one() -> None:
    # a list of rows sized again (``_sized_rows``: from the list kept, by its bytes), or with a row marshal refuses
    # (a Decimal) or a value that is not a list (row by row): the same answer (``True`` is not a known row's ``1``)
    rows = [[k, "i-0abc", True, None, k % 3] for k in range(6)]
    first = values_size._sized_list(rows)  # some rows new
    again = values_size._sized_list(rows)  # the same bytes as the list kept
    assert again == first and [list(map(type, r)) for r in again[0]] == [list(map(type, r)) for r in first[0]]
    # no stored row is one of the caller's (a kept list's rows are shared by the items stored with it, never changed)
    assert not {id(r) for r in again[0]} & {id(r) for r in rows} and again[0] is not first[0]
    assert again == (values.canonical(rows), value_bytes(values.canonical(rows)))
    changed = ([*rows, [9, 1]], [*rows, [Decimal(1)]], [*rows, "x"], [[1, 2], *rows[1:]], [[True, *rows[1][1:]]])
    for other in changed:
        stored, size = values_size._sized_list(other)
        assert stored == values.canonical(other) and size == value_bytes(values.canonical(other))
        assert [list(map(type, r)) if isinstance(r, list) else type(r) for r in stored] == [
            list(map(type, r)) if isinstance(r, list) else type(r) for r in values.canonical(other)
        ]


_ROW_VALUES = st.one_of(st.sampled_from([0, 1, True, False, None, "", "i-0abc", "é"]), st.integers(-5, 10**12))
_ROWS_ST = st.lists(st.lists(_ROW_VALUES, max_size=6), min_size=1, max_size=12)


@given(_ROWS_ST, st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.lists(_ROW_VALUES, max_size=6))))
@settings(max_examples=300, deadline=None)
def test_a_list_of_rows_sized_from_the_one_before_is_as_counted(rows: list[list[Any]], edits: list[Any]) -> None:
    # each list sized from the last kept one whose bytes it shares before and after its changed rows
    # (``_sized_rows``): a row replaced, inserted, dropped, or ``1`` turned into ``True`` in place
    for kind, at, row in [(0, 0, rows[0]), *edits]:
        rows = [list(r) for r in rows]
        at %= len(rows)
        if kind == 0:
            rows[at] = row
        elif kind == 1:
            rows.insert(at, row)
        elif kind == 2 and len(rows) > 1:
            del rows[at]
        elif rows[at]:
            value = rows[at][0]
            rows[at][0] = bool(value) if type(value) is int and value in (0, 1) else value
        stored, size = values_size._sized_list(rows)
        plain = values.canonical(rows)
        assert stored == plain and size == value_bytes(plain)
        assert [list(map(type, r)) for r in stored] == [list(map(type, r)) for r in plain]
        assert not {id(r) for r in stored} & {id(r) for r in rows}  # never a caller's list
        rows[0].append("changed")  # the caller changes its rows after the write: what was stored is as it was
        assert stored == plain


def test_a_list_s_bytes_are_its_rows_bytes_one_after_the_other() -> None:
    # what ``_sized_rows`` reads a row's place in a list by (marshal version 0: no references, no interning marks)
    from marshal import dumps

    shared = "i-0abc"
    rows = [[shared, 1, True, None, shared], [shared, 10**12], [], ["é", shared, False]]
    assert dumps(rows, 0) == dumps(rows, 0)[:5] + b"".join(dumps(r, 0) for r in rows)
    assert dumps(rows, 0)[:5] == dumps([0] * len(rows), 0)[:5]


@settings(max_examples=500, deadline=None)
@given(
    st.integers(-(10**38) + 1, 10**38 - 1)
    | st.sampled_from([0, 10**26, 10**27 - 1, 10**27, -(10**27) + 1, 10**28 + 1, 10**38 - 1, -(10**37) - 3])
    | st.tuples(st.integers(-999, 999), st.integers(0, 29)).map(lambda p: p[0] * 10 ** p[1])
)
def test_an_int_is_canonical_and_sized_as_boto3_s_round_trip_gives_it(number: int) -> None:
    # ``canonical`` takes an int of fewer than 28 digits straight to its Decimal; the round trip it stands for:
    trip = values._trimmed(values._DESERIALIZER.deserialize(values._SERIALIZER.serialize(number)))
    values._NUMBERS.clear()
    for got in (values.canonical(number), values_size.sized_value(number)[0], values.canonical([number])[0]):
        assert got == trip and got.as_tuple() == trip.as_tuple()  # the same digits and exponent, not only equal
    assert values_size.sized_value(number)[1] == counted(trip) == value_bytes(trip)


LONG_NUMBERS = [
    10**28 + 1,
    -(10**37) - 3,
    10**38 - 1,
    Decimal("1234567890123456789012345678901.5"),
    Decimal("-1.234567890123456789012345678901234567E-100"),
]


@pytest.fixture
def both_tables() -> Iterator[tuple[Any, Any]]:
    """moto's table and the simulation's, of the same schema."""
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        kernel = Kernel(seed=1)
        yield ddb.Table("state"), MemoryDynamo(kernel, Faults(kernel)).table("state")


def test_numbers_of_up_to_38_digits_come_back_whole_as_from_dynamodb(both_tables: tuple[Any, Any]) -> None:
    """DynamoDB keeps 38 significant digits ("Supported data types and naming rules", Number); Python's default
    context keeps 28, which once rounded ``10**28 + 1`` to ``1E+28``. moto answers here as DynamoDB does (these
    numbers have no trailing zeroes, where moto gives back what it was sent)."""
    for table in both_tables:
        table.put_item(Item={"pk": "p", "sk": "s", "n": LONG_NUMBERS})
    answers = [table.get_item(Key={"pk": "p", "sk": "s"})["Item"]["n"] for table in both_tables]
    assert answers[0] == answers[1] == LONG_NUMBERS
    assert [n.as_tuple() for n in answers[1]] == [n.as_tuple() for n in answers[0]]
    # sized by all their digits: 29, 38, 38, 32 and 37 significant ones
    assert [value_bytes(n) for n in answers[1]] == [16, 20, 20, 17, 20]


def test_update_arithmetic_is_exact_to_38_digits_and_stored_as_a_put_stores_it(both_tables: tuple[Any, Any]) -> None:
    """``SET v = v + :x``, ``v - :x`` and ``ADD``: exact where the sum has at most 38 significant digits (moto agrees),
    and trimmed as DynamoDB gives every number back (``1.5 + 1.5`` comes back as ``3``; moto gives ``3.0``)."""
    key = {"pk": "p", "sk": "s"}
    start = {**key, "a": 10**28, "b": 10**37, "c": Decimal("1.5"), "d": Decimal("-7")}
    update = {
        "UpdateExpression": "SET a = a + :one, b = b - :one, c = c + :half ADD d :big",
        "ExpressionAttributeValues": {":one": 1, ":half": Decimal("1.5"), ":big": 10**30},
    }
    for table in both_tables:
        table.put_item(Item=start)
        table.update_item(Key=key, **update)
    moto_item, sim_item = (table.get_item(Key=key)["Item"] for table in both_tables)
    assert sim_item == moto_item == {**key, "a": 10**28 + 1, "b": 10**37 - 1, "c": 3, "d": 10**30 - 7}
    assert sim_item["c"].as_tuple() == Decimal(3).as_tuple()  # moto: Decimal("3.0"), not DynamoDB's "3"
    assert [sim_item[n].as_tuple() for n in "abd"] == [moto_item[n].as_tuple() for n in "abd"]


@pytest.mark.parametrize(
    ("start", "expression", "operand", "message"),
    [
        (Decimal("1E+50"), "SET v = v + :x", 1, values.OVERFLOW),  # 51 significant digits
        (Decimal("1E+50"), "SET v = v - :x", 1, values.OVERFLOW),
        (Decimal("9E+125"), "SET v = v + :x", Decimal("9E+125"), values.OVERFLOW),  # past 9.99...E+125
        (Decimal("-9E+125"), "ADD v :x", Decimal("-9E+125"), values.OVERFLOW),
        (Decimal("1E-130"), "SET v = v - :x", Decimal("9E-131"), values.UNDERFLOW),  # 1E-131: below 1E-130
    ],
)
def test_update_arithmetic_dynamodb_cannot_store_is_refused(
    both_tables: tuple[Any, Any], start: Decimal, expression: str, operand: Any, message: str
) -> None:
    """DynamoDB refuses a sum it cannot store ("Supported data types and naming rules", Number: up to 38 digits,
    "Exceeding this results in an exception", and the range 1E-130 to 9.99...E+125), with the words ScyllaDB's
    Alternator tests recorded against it; the item stays as it was. (moto is no reference here: it stores such
    sums, and fails on the exponent notation boto3 sends ``1E+50`` in.)"""
    sim_table = both_tables[1]
    key = {"pk": "p", "sk": "s"}
    sim_table.put_item(Item={**key, "v": start})
    with pytest.raises(ClientError) as refused:
        sim_table.update_item(Key=key, UpdateExpression=expression, ExpressionAttributeValues={":x": operand})
    assert refused.value.response["Error"] == {"Code": "ValidationException", "Message": message}
    assert sim_table.get_item(Key=key)["Item"] == {**key, "v": start}


def test_update_arithmetic_at_the_limits_is_stored_exactly(both_tables: tuple[Any, Any]) -> None:
    """The same sums one digit or one step inside DynamoDB's limits are stored, exactly, and come back written out
    in full as DynamoDB gives every number back (``1e125`` as a 1 and 125 zeroes, never in exponent notation: the
    normalisation ScyllaDB's Alternator tests recorded against DynamoDB, test/alternator/test_number.py)."""
    sim_table = both_tables[1]
    key = {"pk": "p", "sk": "s"}
    cases = [
        (
            Decimal("1E+50"),
            Decimal("1E+13"),
            Decimal("100000000000000000000000000000000000010000000000000"),
        ),  # 38 digits
        (Decimal("9E+125"), Decimal("9E+124"), Decimal("9.9E+125")),
        (Decimal("2E-130"), Decimal("-1E-130"), Decimal("1E-130")),
    ]
    for start, operand, expected in cases:
        sim_table.put_item(Item={**key, "v": start})
        sim_table.update_item(Key=key, UpdateExpression="SET v = v + :x", ExpressionAttributeValues={":x": operand})
        got = sim_table.get_item(Key=key)["Item"]["v"]
        assert got == expected and got.as_tuple() == Decimal(format(expected, "f")).as_tuple()
    assert got.as_tuple().exponent == -130  # 0.000...1, not 1E-130
