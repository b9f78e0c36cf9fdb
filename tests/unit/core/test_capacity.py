"""Bounded replay (core.capacity): the limits and the clamp."""

from __future__ import annotations

import doctest
import itertools

import core.capacity
from core.capacity import Bounds, clamp, donor_limit, surge_limit


def test_doctests() -> None:
    assert doctest.testmod(core.capacity).failed == 0


def test_a_forged_original_cannot_raise_the_limit() -> None:
    assert donor_limit(10**9, 4, 2.0) == 8
    assert surge_limit(10**9, 4, 1) == 5
    assert donor_limit(1, 4, 2.0) == 2  # a lower record only lowers it


def test_within_bounds_nothing_changes() -> None:
    out = clamp(5, 8, Bounds("g", min_size=1, max_limit=8))
    assert (out.desired, out.max_size, out.clamped) == (5, 8, False)


def test_absurd_targets_are_clamped_with_reasons() -> None:
    out = clamp(1_000_000, 2_000_000, Bounds("g", min_size=1, max_limit=8, source="factor 2 x 4"))
    assert (out.desired, out.max_size) == (8, 8)
    assert any("MaxSize 2000000 above the limit 8 (factor 2 x 4)" in r for r in out.reasons)


def test_below_min_size_is_raised_to_it() -> None:
    out = clamp(0, 0, Bounds("g", min_size=2, max_limit=8))
    assert (out.desired, out.max_size) == (2, 2)


def test_the_result_is_always_within_bounds() -> None:
    sizes = [None, -1, 0, 1, 2, 3, 5, 8, 13, 10**7]
    for desired, max_size, min_size, limit in itertools.product(sizes, sizes, [0, 1, 3, 9], [0, 2, 4, 8]):
        out = clamp(desired, max_size, Bounds("g", min_size=min_size, max_limit=limit))
        top = max(min_size, limit)
        if desired is not None:
            assert out.desired is not None and min_size <= out.desired <= top
            assert out.max_size is None or out.desired <= out.max_size
        if max_size is not None:
            assert out.max_size is not None and min_size <= out.max_size <= top
        assert (out.desired is None) == (desired is None) and (out.max_size is None) == (max_size is None)
