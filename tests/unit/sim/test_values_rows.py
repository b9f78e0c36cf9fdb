"""A ``RUN#`` item's rows remembered by their marshalled bytes (``sim.values_size._MARSHALLED``) are canonicalised
and sized exactly as the plain ``canonical`` and ``value_bytes`` do, types and all: random rows of values that are
equal in Python but not in DynamoDB (``True``, ``1``, ``1.0``, ``Decimal(1)``), big numbers, strings, ``None`` and
nested values, each saved twice (the second from the memo) and in either order, refused (floats) as boto3 refuses."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import values_size
from sim.values import canonical_item, item_bytes

_EQUALS = st.sampled_from([True, False, 1, 0, Decimal(1), Decimal(0), Decimal("1.0"), 10**40, Decimal(10**40)])
_SCALARS = st.one_of(_EQUALS, st.text(max_size=4), st.integers(-(10**12), 10**12), st.none())
_ROWS = st.lists(st.one_of(_SCALARS, st.just(1.0), st.lists(_SCALARS, max_size=2)), max_size=6)


def _typed(value: Any) -> Any:
    if type(value) is list:
        return [_typed(v) for v in value]
    return (type(value), value)


@given(st.lists(_ROWS, min_size=1, max_size=4), st.booleans())
@settings(max_examples=500, deadline=None)
def test_rows_are_canonicalised_and_sized_as_counted_remembered_or_not(rows: list[list[Any]], backwards: bool) -> None:
    for row in [*rows, *rows][:: -1 if backwards else 1]:  # each twice: the second from the memo
        item = {"pk": "p", "rows": [row]}
        try:
            plain = canonical_item(item)
        except (TypeError, ArithmeticError) as err:  # a float, a number boto3 cannot hold: refused from the memo too
            with pytest.raises(type(err)):
                values_size.sized_canonical_item(item)
            continue
        stored, size = values_size.sized_canonical_item(item)
        assert _typed(stored["rows"]) == _typed(plain["rows"]) and size == item_bytes(plain)


def test_equal_rows_of_other_types_never_share_an_entry() -> None:
    one, _ = values_size.sized_canonical_item({"pk": "p", "rows": [["i-1", 1, None]]})
    flag, _ = values_size.sized_canonical_item({"pk": "p", "rows": [["i-1", True, None]]})
    assert type(one["rows"][0][1]) is Decimal and type(flag["rows"][0][1]) is bool
    with pytest.raises(TypeError):
        values_size.sized_canonical_item({"pk": "p", "rows": [["i-1", 1.0, None]]})
    row = ["i-1", 1, None]
    again, _ = values_size.sized_canonical_item({"pk": "p", "rows": [row]})
    assert again == one and again["rows"][0] is not row  # never the caller's list (a stored one may be shared)
    row[1] = True  # changed in place by the caller after the write: not what was stored
    assert again == one and type(values_size.sized_canonical_item({"pk": "p", "rows": [row]})[0]["rows"][0][1]) is bool
