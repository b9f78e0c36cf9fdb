"""A Query's one-page answer (``sim.dynamo.MemoryTable._whole``) is bounded by the bytes of the sort key groups
between its ends' (``sim.dynamo_keys.sort_key_group``) instead of summed: it answers exactly what the plain sum
answers (every item when the keys' sizes together are under a page, None when not), for random partitions of random
sort keys (with and without ``#``), sizes, ranges in either direction and writes that replace and delete items."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.dynamo import PAGE_BYTES, MemoryDynamo
from sim.dynamo_keys import sort_key_group
from sim.faults import Faults
from sim.kernel import Kernel

SORT_KEYS = st.text(alphabet="AB#", min_size=1, max_size=4)
SIZES = st.sampled_from([PAGE_BYTES // 3, PAGE_BYTES // 2]) | st.integers(min_value=1, max_value=PAGE_BYTES // 2)


@settings(max_examples=500, deadline=None)
@given(
    writes=st.lists(st.tuples(SORT_KEYS, st.none() | SIZES), max_size=16),
    bounds=st.tuples(st.integers(0, 12), st.integers(0, 12)),
    forward=st.booleans(),
)
def test_a_page_is_bounded_by_its_group_as_the_sum_bounds_it(
    writes: list[tuple[str, int | None]], bounds: tuple[int, int], forward: bool
) -> None:
    kernel = Kernel(seed=1)
    table = MemoryDynamo(kernel, Faults(kernel)).table("state")
    for sk, size in writes:
        table.store(("p", sk), None if size is None else {"pk": "p", "sk": sk}, size or 0)
    order = table.sort_keys("p")
    keys = order[min(bounds) : max(bounds)]
    if not forward:
        keys.reverse()
    sizes = table._sizes.get("p", {})
    whole = table._whole("p", keys)
    if sum(sizes[k] for k in keys) >= PAGE_BYTES:
        assert whole is None
    else:
        assert whole == [{"pk": "p", "sk": k} for k in keys]


@settings(max_examples=1000, deadline=None)
@given(keys=st.lists(st.text(alphabet="AB#$", max_size=5), min_size=1, max_size=8))
def test_the_keys_between_two_keys_have_groups_between_theirs(keys: list[str]) -> None:
    keys.sort()
    low, high = sort_key_group(keys[0]), sort_key_group(keys[-1])
    assert all(low <= sort_key_group(k) <= high for k in keys)


def test_a_key_s_group_is_its_prefix_to_the_first_hash() -> None:
    assert sort_key_group("NODE#i-1#x") == "NODE#" and sort_key_group("#a") == "#" and sort_key_group("META") == "META"
