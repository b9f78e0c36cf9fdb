"""``MembershipReporter._identified``: a page of the very views the same page had at the last list is answered from
what was found then (a list answered from a cache); any other page is read node by node. Both must say the same."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.kube.views import NodeView
from agent.membership import MembershipReporter
from agent.membership_records import node_identity


def reporter() -> MembershipReporter:
    none: Any = None  # _identified reads no node source, table or ASG lookup
    return MembershipReporter(none, none, none, resync_seconds=60, ttl_seconds=86400, term="t")


def view(n: int, aws: bool = True) -> NodeView:
    provider_id = f"aws:///us-east-1{'ab'[n % 2]}/i-0{n:016x}" if aws else f"gce://p/z/n{n}"
    return NodeView(name=f"node-{n}", provider_id=provider_id)


def read_node_by_node(page: list[NodeView]) -> tuple[list[NodeView], list[str]]:
    pairs = [(node, identity[1]) for node in page if (identity := node_identity(node)) is not None]
    return [node for node, _ in pairs], [instance_id for _, instance_id in pairs]


# a list: page sizes, and per place the index of a view in a pool (the same object again: a cached list) or a new
# view of a node (the same node's fields in a new object, as a list from the apiserver answers)
_LISTS = st.lists(
    st.tuples(
        st.integers(1, 4),
        st.lists(st.tuples(st.integers(0, 11), st.booleans()), max_size=12),
    ),
    min_size=1,
    max_size=8,
)


@given(_LISTS)
@settings(max_examples=300, deadline=None)
def test_a_page_is_identified_as_reading_it_node_by_node_says(lists: list[tuple[int, list[tuple[int, bool]]]]) -> None:
    pool = [view(n, aws=n % 5 != 4) for n in range(12)]  # some without an AWS providerID
    ours = reporter()
    for size, places in lists:
        nodes = [pool[n] if cached else view(n, aws=n % 5 != 4) for n, cached in places]
        for number, start in enumerate(range(0, max(1, len(nodes)), size)):
            page = nodes[start : start + size]
            listed, ids = ours._identified(number, page)
            expected = read_node_by_node(page)
            assert ids == expected[1]
            assert len(listed) == len(expected[0]) and all(map(lambda a, b: a is b, listed, expected[0]))


def test_the_same_views_again_are_answered_without_reading_them() -> None:
    ours = reporter()
    page = [view(1), view(2, aws=False), view(3)]
    first = ours._identified(0, page)
    assert ours._identified(0, list(page)) == first  # the same views in a new list: the answer kept
    moved = [page[2], page[1], page[0]]
    assert ours._identified(0, moved)[1] == ["i-00000000000000003", "i-00000000000000001"]
    assert ours._identified(1, page)[1] == ["i-00000000000000001", "i-00000000000000003"]  # each page its own
