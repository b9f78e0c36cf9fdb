"""Hypothesis strategies for hostile input: any JSON value (``json_values``, what ``json.loads`` can give a Lambda
or the agent) and mutations of real inputs (``mutated``: one to three fields replaced by such a value, or by one shaped
like the fields that matter, or deleted). Shared by the Lambdas' and the agent's fuzz tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# Any JSON value (what json.loads can give a Lambda): scalars, then arrays and objects of them, nested.
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
# Values shaped like the fields that matter, so mutations reach past the first check.
interesting = st.sampled_from(
    [
        "",
        "aws.ec2",
        "aws.autoscaling",
        "node-manager.agent",
        "EC2 Spot Instance Interruption Warning",
        "2024-03-05T10:15:30Z",
        "2024-03-05T10:15:30+25:00",
        "1709633730",
        1709633730,
        "i-0123456789abcdef0",
        "i-XYZ",
        "terminate",
        "hibernate",
        [],
        {},
        None,
        True,
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


def _set(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    parent = copy
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return copy


@st.composite
def mutated(draw: st.DrawFn, originals: list[Any]) -> Any:
    """One of ``originals`` with one to three fields replaced by any JSON value (or deleted)."""
    value = draw(st.sampled_from(originals))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(value)))
        new = draw(interesting | json_values)
        value = _set(value, path, new, delete=draw(st.booleans()))
    return value
