"""A run's and an invocation's ids: their shape, and the hex source a deterministic simulation swaps in."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from core.runids import hex_source, new_invocation_id, new_run_id

START = datetime(2026, 12, 3, 12, 0, 5, tzinfo=UTC)


def test_ids_draw_their_hex_from_the_source_inside_the_block_only() -> None:
    asked: list[int] = []

    def source(n: int) -> str:
        asked.append(n)
        return "ab" * n

    with hex_source(source):
        assert new_run_id(START) == "20261203T120005Z-ababab"
        assert new_invocation_id() == "ab" * 6
    assert asked == [3, 6]
    assert re.fullmatch(r"20261203T120005Z-[0-9a-f]{6}", new_run_id(START))
    assert re.fullmatch(r"[0-9a-f]{12}", new_invocation_id())
    assert len({new_invocation_id() for _ in range(50)}) == 50  # secrets again, not the constant source
    assert asked == [3, 6]


def test_the_source_is_restored_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), hex_source(lambda n: "00" * n):
        raise RuntimeError("crash mid-invocation")
    assert new_invocation_id() != "0" * 12  # 12 zero hex digits from secrets: one chance in 2**48
