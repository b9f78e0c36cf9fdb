"""The bounds of a refresh run's ``RUN#`` item in the table: its size (what a save may write) and its retention
(how long a run that is over keeps it). Pure constants: ``adapters.dynamo.runs`` applies them, the refresher's
settings (``core.settings.refresher``) default to them.
"""

from __future__ import annotations

# A ``RUN#`` save is not attempted when its item would be larger than this (``adapters.dynamo.runs``): DynamoDB's
# 400 KB item size (``core.itemsize.DYNAMODB_ITEM_LIMIT_BYTES``) less 20 KB, room for the small write that then pauses
# the run (``RunStore.record_refusal``) and for the size count's approximation of numbers.
RUN_ITEM_GUARD_BYTES = 380 * 1024
REFUSAL_REASON_CHARS = 300  # the longest reason a refusal's small write records
# how long a run that is over keeps its RUN# item: its ``expires_at`` (the table's TTL attribute) is this many
# seconds after its end (``RUN_RETENTION_SECONDS``; DynamoDB deletes an expired item lazily, readers skip it at once)
RUN_RETENTION_SECONDS = 30 * 86400
MIN_RUN_RETENTION_SECONDS = 86400
