"""``plain`` and ``dynamo``: the lists and maps they convert element by element inline come out as the one-value
rules make them."""

from decimal import Decimal
from typing import Any

from adapters.dynamo.values import dynamo, plain


def plain_by_rule(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain_by_rule(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_by_rule(v) for v in value]
    return value


def dynamo_by_rule(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: dynamo_by_rule(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [dynamo_by_rule(v) for v in value]
    return value


ANSWERED = {
    "rows": [[Decimal(3), Decimal(0), "i-0abc", True, Decimal(1), None, Decimal("12.5"), Decimal("-7"), [Decimal(2)]]],
    "m": {"a": Decimal("1.0"), "b": [Decimal("0.25"), {"c": Decimal(10)}], "d": None, "e": b"x", "f": False},
    "n": Decimal("1E+3"),
    "ids": ["i-1", "i-2", "i-3"],
    "scalars": ["i-1", True, None, b"x", Decimal(4)],
}
PLAIN = {
    "rows": [[3, 0, "i-0abc", True, 1.5, None, 2.25, -7, [2, (1, 2.5)]]],
    "m": {"a": 1.0, "b": [0.25, {"c": None, "d": 3}], "e": b"x"},
    "t": (1.5, None),
    "ids": ["i-1", "i-2", "i-3"],
    "u": ("i-1", 2, None),
}


def test_plain_makes_integral_numbers_ints_and_others_floats_everywhere() -> None:
    got = plain(ANSWERED)
    assert got == plain_by_rule(ANSWERED)
    assert [type(v) for v in got["rows"][0]] == [int, int, str, bool, int, type(None), float, int, list]
    assert type(got["m"]["a"]) is int and type(got["m"]["b"][0]) is float and type(got["n"]) is int
    assert got["ids"] == ANSWERED["ids"] and got["ids"] is not ANSWERED["ids"]  # nothing converted: a new list still
    assert type(got["scalars"][4]) is int


def test_dynamo_makes_floats_decimals_and_drops_none_from_maps_everywhere() -> None:
    got = dynamo(PLAIN)
    assert got == dynamo_by_rule(PLAIN)
    assert got["rows"][0][4] == Decimal("1.5") and type(got["rows"][0][4]) is Decimal
    assert got["rows"][0][5] is None  # a list keeps its None
    assert got["rows"][0][8] == [2, [1, Decimal("2.5")]]
    assert got["m"]["b"][1] == {"d": 3} and got["t"] == [Decimal("1.5"), None]
    assert got["ids"] == PLAIN["ids"] and got["ids"] is not PLAIN["ids"] and got["u"] == ["i-1", 2, None]


def test_a_row_read_again_comes_out_as_its_own_content_in_a_new_list() -> None:
    # ``True`` and ``Decimal(1)`` are equal in Python (and hash alike); a remembered row keeps them apart
    first = plain({"rows": [["i-1", True, Decimal(7)]]})["rows"][0]
    second = plain({"rows": [["i-1", Decimal(1), Decimal(7)]]})["rows"][0]
    assert [type(v) for v in first] == [str, bool, int] and [type(v) for v in second] == [str, int, int]
    again = plain({"rows": [["i-1", True, Decimal(7)]]})["rows"][0]
    assert again == first and again is not first  # a reader may change its copy
    again.append("x")
    assert plain({"rows": [["i-1", True, Decimal(7)]]})["rows"][0] == ["i-1", True, 7]
    # a row holding a list is converted each time, by the rule
    nested = {"rows": [[Decimal("2.5"), [Decimal(2)]]]}
    assert plain(nested) == plain_by_rule(nested)


def test_dynamo_item_converts_as_dynamo_does_but_sends_the_named_attributes_as_they_are() -> None:
    from adapters.dynamo.values import dynamo_item

    item = {"rows": [[1, "a", True, None]], "f": 1.5, "gone": None, "m": {"x": None, "y": 0.5}}
    assert dynamo_item(item) == dynamo(item)
    sent = dynamo_item(item, as_is=("rows",))
    assert sent == dynamo(item)
    assert sent["rows"] is item["rows"]
    assert dynamo_item(item)["rows"] is not item["rows"]
