"""The EventBridge envelope shared by the event models, stricter than Powertools' ``EventBridgeModel`` on ``id``.

Source of the envelope's fields: "Amazon EventBridge events" (EventBridge User Guide): ``version``, ``id``,
``detail-type``, ``source``, ``account``, ``time``, ``region``, ``resources``, ``detail``.
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import Field

# EventBridge event ids are UUIDs; allow any short token of letters, digits and dashes (replays, test tools).
EVENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$"


class AwsEventModel(EventBridgeModel):
    """An EventBridge event whose ``id`` can safely become part of a command id and an idempotency key."""

    id: str = Field(pattern=EVENT_ID_PATTERN)
