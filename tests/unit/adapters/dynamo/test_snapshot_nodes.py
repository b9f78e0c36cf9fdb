"""``snapshot._nodes``: the ``NODE#`` items of a membership read told in C for the usual answer (the mark, then
``NODE#`` items only), key by key for any other: the same items and keys either way."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.dynamo.nodes import MARK_SK
from adapters.dynamo.snapshot import _nodes

_KEYS = st.one_of(
    st.builds(lambda s: f"NODE#{s}", st.text(max_size=4)),
    st.sampled_from([MARK_SK, "NODE", "NODE$", "XNODE#a", "NODE#a\0NODE#b", "\0NODE#c", "NODE#\0"]),
    st.text(max_size=6),
)


@given(st.lists(_KEYS, max_size=8, unique=True), st.booleans())
@settings(max_examples=500, deadline=None)
def test_the_node_items_are_those_whose_key_has_the_prefix(keys: list[str], marked: bool) -> None:
    keys = [MARK_SK, *(k for k in keys if k != MARK_SK)] if marked else keys
    items: list[dict[str, Any]] = [{"sk": k} for k in keys]
    nodes, listed = _nodes(items, keys)
    wanted = [k for k in keys if k.startswith("NODE#")]
    assert listed == wanted and [i["sk"] for i in nodes] == wanted
    assert all(a is b for a, b in zip(nodes, (i for i in items if i["sk"].startswith("NODE#")), strict=True))


def test_the_usual_read_is_the_items_after_the_mark() -> None:
    keys = [MARK_SK, "NODE#i-1", "NODE#i-2"]
    items: list[dict[str, Any]] = [{"sk": k} for k in keys]
    assert _nodes(items, keys) == (items[1:], keys[1:])
    assert _nodes(items[1:], keys[1:]) == (items[1:], keys[1:])
    assert _nodes([], []) == ([], [])
