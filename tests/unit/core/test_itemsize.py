"""``core.itemsize``: a list's strings and ints counted inline give the sizes the one-value rule gives."""

import random
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.itemsize import _number_bytes, item_bytes, value_bytes


def by_rule(value: Any) -> int:
    """The guide's rule element by element (what ``value_bytes`` did for a list before its inline count)."""
    if isinstance(value, list):
        return 3 + sum(1 + by_rule(v) for v in value)
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | float | Decimal):
        return _number_bytes(value)
    return value_bytes(value)


def test_a_list_s_size_is_its_elements_by_the_rule() -> None:
    rng = random.Random(7)
    pool: list[Any] = [0, 1, -1, 10, 100, 120, -5000, 10**17 + 3, True, False, None, "", "abc", "é€", 1.5, Decimal(7)]
    for _ in range(2000):
        row = [rng.choice(pool) for _ in range(rng.randrange(0, 15))]
        row += [rng.randrange(-(10**12), 10**12) // rng.choice((1, 10, 1000)) for _ in range(3)]
        row.append([rng.choice(pool), {"k": rng.choice(pool)}])
        assert value_bytes(row) == by_rule(row), row


def test_numbers_in_a_list_cost_their_significant_digits() -> None:
    # 0 and 5: one digit (2 bytes); 12000: two (2); 123: three (3); each element 1 more, the list 3
    assert item_bytes({"l": [0, 5, 12000, 123]}) == 1 + 3 + 4 + 2 + 2 + 2 + 3


def test_a_row_s_remembered_size_is_its_content_s_with_its_types() -> None:
    # equal as Python values (True == 1, hash alike) but not as DynamoDB stores them: BOOL 1 byte, N 2
    assert item_bytes({"rows": [[True, None]]}) == 4 + 3 + 1 + (3 + 2 + 1 + 1)
    assert item_bytes({"rows": [[1, None]]}) == 4 + 3 + 1 + (3 + 2 + 2 + 1)
    assert item_bytes({"rows": [[True, None]]}) == 4 + 3 + 1 + (3 + 2 + 1 + 1)  # remembered, still its own
    # a row holding a map or a float is sized each time, by the rule
    nested: list[Any] = [["a", {"k": 12345}], [1.5, 7]]
    assert value_bytes(nested) == by_rule(nested)
    nested[0][1]["k"] = 1
    assert value_bytes(nested) == by_rule(nested)


@given(st.lists(st.one_of(st.text(max_size=5), st.text(alphabet="ab", max_size=3), st.integers(-99, 99), st.none())))
@settings(max_examples=500, deadline=None)
def test_a_list_of_strings_is_sized_as_by_the_rule(values: list[Any]) -> None:
    # a list of strings only (a step's ``surge_baseline``) is sized by one join: the same as element by element
    assert value_bytes(values) == by_rule(values)
    assert item_bytes({"steps": [{"surge_baseline": values}]}) == 5 + (3 + 1) + (3 + 1 + 14) + by_rule(values)
