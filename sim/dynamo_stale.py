"""Eventually consistent reads for the in-memory DynamoDB, as an injected fault.

DynamoDB Developer Guide, "Read consistency": an eventually consistent read (GetItem or Query with
``ConsistentRead`` false, the default) "might not reflect the results of a recently completed write operation";
a strongly consistent read always does. The in-memory table is strongly consistent unless the fault schedule asks
otherwise: while ``faults.check("dynamodb", "GetItem" | "Query")`` answers ``StaleRead``, an eventually consistent
read returns each item as it was before its last write when that write is at most ``STALE_SECONDS`` old (an item
created that recently is not there yet, one deleted that recently still is). Strongly consistent reads and writes
ignore the code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sim.dynamo_calls import Expressions
from sim.values import Item

STALE_READ = "StaleRead"
STALE_SECONDS = 1.0  # how far behind an eventually consistent read may be (AWS: "usually within one second")


class History:
    """The version each item had before its last write, and when that write was (simulated seconds)."""

    def __init__(self) -> None:
        self._by_partition: dict[str, dict[str, tuple[float, Item | None]]] = {}

    def record(self, key: tuple[str, str], at: float, before: Item | None) -> None:
        self._by_partition.setdefault(key[0], {})[key[1]] = (at, before)

    def version(self, key: tuple[str, str], current: Item | None, now: float) -> Item | None:
        """What a stale read of ``key`` sees: the item before a write less than ``STALE_SECONDS`` ago, else
        ``current``."""
        entry = self._by_partition.get(key[0], {}).get(key[1])
        return entry[1] if entry is not None and now - entry[0] <= STALE_SECONDS else current

    def query(
        self,
        pk: str,
        keys: list[str],
        partition: Mapping[str, Item],
        now: float,
        exprs: Expressions,
        forward: bool,
        start: str | None,
    ) -> Iterator[tuple[str, Item]]:
        """(sort key, item) a stale Query reads, in its order: ``keys`` (the current items the key condition
        selects, after ``start``) as they were, plus items deleted less than ``STALE_SECONDS`` ago that the key
        condition selects."""
        recent = self._by_partition.get(pk, {})
        for sk in [sk for sk, (at, _) in recent.items() if now - at > STALE_SECONDS]:
            del recent[sk]  # too old to matter again
        gone = [
            sk
            for sk, (_, before) in recent.items()
            if sk not in partition
            and before is not None
            and exprs.holds(exprs.key_condition, before)
            and (start is None or (sk > start if forward else sk < start))
        ]
        for sk in sorted([*keys, *gone], reverse=not forward):
            item = self.version((pk, sk), partition.get(sk), now)
            if item is not None:
                yield sk, item
