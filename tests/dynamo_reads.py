"""What a DynamoDB Query answered, for tests that check a reader leaves items in the table."""

from __future__ import annotations

from typing import Any

import pytest


def answered_sort_keys(monkeypatch: pytest.MonkeyPatch, table: Any) -> list[str]:
    """Wrap ``table.query`` (a boto3 ``Table`` resource) for the rest of the test; the returned list collects the
    sort key of every item any Query then answers, in order (items a FilterExpression dropped are not answered)."""
    answered: list[str] = []
    real = table.query

    def counted(**kwargs: Any) -> Any:
        out = real(**kwargs)
        answered.extend(str(item["sk"]) for item in out.get("Items", []))
        return out

    monkeypatch.setattr(table, "query", counted)
    return answered
