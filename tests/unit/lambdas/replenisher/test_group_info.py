"""``group_info`` with what it kept against ``managed_group``: the same answer, tick after tick, whatever changed."""

from __future__ import annotations

import copy
import operator
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, NODE_ROLE_TAG, managed_group
from lambdas.replenisher.group_info import Seen, group_info

_TEXT = st.one_of(
    st.sampled_from(["c", "d", "1", "nodes-us-east-1a", "us-east-1a", "True"]), st.integers(0, 1), st.booleans()
)
_TAG = st.fixed_dictionaries(
    {"Key": st.one_of(st.sampled_from([CLUSTER_TAG, INSTANCE_GROUP_TAG, NODE_ROLE_TAG, "x"]), st.integers(0, 1))},
    optional={"Value": _TEXT, "PropagateAtLaunch": st.booleans()},
)
_KOPS = st.builds(  # mostly the cluster's groups, some of them equal but for True and 1
    lambda name, cluster, group, role, zones: {
        "AutoScalingGroupName": name,
        "Tags": [{"Key": CLUSTER_TAG, "Value": cluster}, {"Key": INSTANCE_GROUP_TAG, "Value": group}, *role],
        "AvailabilityZones": zones,
    },
    st.just("g"),
    st.sampled_from(["c", "d"]),
    st.sampled_from(["nodes-us-east-1a", "nodes", True, 1]),
    st.sampled_from([[], [{"Key": NODE_ROLE_TAG, "Value": "1"}]]),
    st.sampled_from([["us-east-1a"], []]),
)
_RAW = st.fixed_dictionaries(
    {"AutoScalingGroupName": _TEXT},
    optional={"Tags": st.lists(_TAG, max_size=4), "AvailabilityZones": st.lists(_TEXT, max_size=2)},
)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.one_of(_KOPS, _RAW), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 2), st.sampled_from("cd")), max_size=10),
)
@example(  # equal (True == 1) but not the same text: made again
    [
        {
            "AutoScalingGroupName": "g",
            "Tags": [{"Key": CLUSTER_TAG, "Value": "c"}, {"Key": INSTANCE_GROUP_TAG, "Value": v}],
        }
        for v in (True, 1)
    ],
    [(0, "c"), (1, "c")],
)
def test_the_kept_answer_is_the_made_one(raws: list[dict[str, Any]], reads: list[tuple[int, str]]) -> None:
    """Each read a new copy of one of a few groups (as boto3 answers): equal ones, and ``True`` for ``1``, repeat."""
    last: Seen | None = None
    for at, cluster in reads:
        raw = copy.deepcopy(raws[at % len(raws)])
        try:
            expected: object = managed_group(raw, cluster)
        except (ValidationError, TypeError, KeyError, AttributeError) as err:
            expected = type(err)
        try:
            info, last = group_info(raw, cluster, last)
        except (ValidationError, TypeError, KeyError, AttributeError) as err:
            info = type(err)
        assert info == expected
        if last is not None:  # copies kept: what was answered may change afterwards
            assert last[1] is not raw.get("Tags") and not any(map(operator.is_, last[1], raw.get("Tags", [])))
