"""The EventBridge envelope shared by the event models, stricter than Powertools' ``EventBridgeModel`` on ``id`` and
``time``.

Source of the envelope's fields: "Amazon EventBridge events" (EventBridge User Guide): ``version``, ``id``,
``detail-type``, ``source``, ``account``, ``time``, ``region``, ``resources``, ``detail``.
"""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import Field, field_validator

# EventBridge event ids are UUIDs; allow any short token of letters, digits and dashes (replays, test tools).
EVENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$"
# RFC 3339 date-time (section 5.6), as EventBridge writes it ("2024-03-05T10:15:30Z"); fractions and offsets
# allowed. The zone may be left out (read as UTC, a long-standing allowance for hand-written test events).
RFC3339_RE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")


class AwsEventModel(EventBridgeModel):
    """An EventBridge event whose ``id`` can safely become part of a command id and an idempotency key, and whose
    ``time`` is an RFC 3339 string (pydantic alone would also take epoch numbers and numeric strings)."""

    id: str = Field(pattern=EVENT_ID_PATTERN)

    @field_validator("time", mode="before")
    @classmethod
    def _rfc3339(cls, value: Any) -> Any:
        if not isinstance(value, str) or not RFC3339_RE.fullmatch(value):
            raise ValueError(f"must be an RFC 3339 date-time string such as 2024-03-05T10:15:30Z, not {value!r:.40}")
        return value
