"""``unregistered`` with its memo against the plain look-up: the same ids, tick after tick, whatever is reused."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lambdas.replenisher.unregistered import UnregisteredMemo, unregistered

IDS = st.sampled_from([f"i-{k}" for k in range(8)])
# per tick: which of 3 maps (new or the last of that index), whether it is kept, and per group a tuple (new or last)
TICKS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.booleans(),
        st.frozensets(IDS),
        st.booleans(),
        st.lists(st.tuples(st.sampled_from("abc"), st.booleans(), st.lists(IDS, max_size=5)), max_size=4),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(TICKS)
def test_the_memo_answers_as_the_plain_look_up(ticks: list[tuple[int, bool, frozenset[str], bool, list[Any]]]) -> None:
    memo = UnregisteredMemo()
    maps: dict[int, dict[str, object]] = {}
    tuples: dict[str, tuple[str, ...]] = {}
    for which, new_map, keys, kept, groups in ticks:
        if new_map or which not in maps:
            maps[which] = dict.fromkeys(keys)
        nodes = maps[which]
        if not kept:  # a map not kept may be one the caller changes afterwards
            nodes = dict(nodes)
        in_service = []
        for name, new_ids, ids in groups:
            if new_ids or name not in tuples:
                tuples[name] = tuple(ids)
            in_service.append((name, tuples[name]))
        got = unregistered(memo, nodes, kept, in_service)
        assert got == [i for _, ids in in_service for i in ids if i not in nodes]
        if not kept:
            nodes.clear()
