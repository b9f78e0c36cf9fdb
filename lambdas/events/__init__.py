"""Parse AWS events into the project's internal event types.

One module per event kind (``spot``, ``rebalance``), each opening with an example payload; ``dispatch`` holds
the table keyed by (source, detail-type) and the single entry point, ``parse_notice``.
"""

from __future__ import annotations

from lambdas.events.dispatch import DISPATCH, parse_notice
from lambdas.events.notice import InstanceAction, InterruptionNotice, NoticeKind

__all__ = ["DISPATCH", "InstanceAction", "InterruptionNotice", "NoticeKind", "parse_notice"]
