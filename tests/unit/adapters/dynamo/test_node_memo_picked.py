"""``picked``: the items of a Query's answer (each sort key at most once) with the sort keys a patch needs, found by
bisection in an answer in sort-key order and by a look at every item otherwise; always what a map made from the whole
answer gives (none for a key with no item), whatever the order (property-based: hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (requirements-dev.txt) is not installed")

from hypothesis import given
from hypothesis import strategies as st

from adapters.dynamo.query_keys import fetch_and_listed, picked, sort_keys


def whole(items: list[dict[str, Any]], keys: list[str]) -> dict[str, dict[str, Any]]:
    """What the answer gives for ``keys``, made from every item (the later of a key held twice)."""
    wanted = set(keys)
    return {str(i.get("sk", "")): i for i in items if str(i.get("sk", "")) in wanted}


slots = st.lists(st.integers(0, 40), max_size=40, unique=True)


@given(slots, st.lists(st.integers(0, 45), max_size=20), st.booleans())
def test_the_items_picked_are_those_of_the_whole_answer(held: list[int], asked: list[int], ordered: bool) -> None:
    # an answer in sort-key order (a Query's), or in the order drawn; each key once either way
    items = [{"sk": f"NODE#i-{n:017x}", "n": k} for k, n in enumerate(sorted(held) if ordered else held)]
    keys = [f"NODE#i-{n:017x}" for n in asked]

    got = picked(items, keys)

    assert got == whole(items, keys)
    assert all(got[sk] is whole(items, keys)[sk] for sk in got)  # the item itself, not a copy


def test_an_item_with_no_sort_key_is_never_picked_and_a_deleted_key_is_absent() -> None:
    items = [{"n": 0}, {"sk": "NODE#i-1", "n": 1}, {"sk": "NODE#i-3", "n": 3}]
    assert picked(items, ["NODE#i-1", "NODE#i-2", "NODE#i-3"]) == {"NODE#i-1": items[1], "NODE#i-3": items[2]}


@given(st.lists(st.one_of(st.none(), st.text(max_size=3), st.integers(0, 3)), max_size=6))
def test_sort_keys_read_in_c_are_the_keys_read_one_by_one(keys: list[object]) -> None:
    """Items with a string key each (the fast path), or one without (None here) or with another type: the same list
    as ``str(item.get("sk", ""))`` of each."""
    items = [{"pk": "p"} if key is None else {"sk": key} for key in keys]
    assert sort_keys(items) == [str(item.get("sk", "")) for item in items]


@given(slots, st.lists(st.integers(0, 45), max_size=20), st.booleans(), st.booleans())
def test_picked_from_the_answers_sort_keys_is_picked_from_its_items(
    held: list[int], asked: list[int], ordered: bool, keyless: bool
) -> None:
    """``fetch_and_listed``: the fetch bisects the keys ``listed`` read (once for both), and answers what ``picked``
    answers reading each item's key; ``listed`` is ``sort_keys``."""
    items: list[dict[str, Any]] = [
        {"sk": f"NODE#i-{n:017x}", "n": k} for k, n in enumerate(sorted(held) if ordered else held)
    ]
    if keyless:
        items.insert(len(items) // 2, {"n": -1})  # an item without a key ("": never asked for)
    keys = [f"NODE#i-{n:017x}" for n in asked]
    fetch, listed = fetch_and_listed(items)

    got = fetch(keys)

    assert got == picked(items, keys) == whole(items, keys)
    assert all(got[sk] is whole(items, keys)[sk] for sk in got)
    assert listed() == sort_keys(items) and listed() is listed()
