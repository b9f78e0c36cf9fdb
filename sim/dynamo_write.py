"""One conditional write of the in-memory DynamoDB (``Write``): what PutItem, UpdateItem, DeleteItem and
TransactWriteItems all apply, the item it leaves and that item's size, and what a write answers in ``Attributes``
(``returned``). Semantics as in ``sim.dynamo``'s module docstring; sizes as "Item sizes and formats" counts them
(``sim.values.item_bytes``), at most 400 KB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.dynamo_calls import Expressions, validation
from sim.values import MAX_ITEM_BYTES, MISSING, Item, copy_item, value_bytes, wire

# an item's ``item_bytes`` and the ``value_bytes`` of its list, map and set attributes by name (``MemoryTable.sizing``)
Sizing = tuple[int, dict[str, int]]
_CONTAINERS = (list, dict, set)
_NOT_GIVEN = (MISSING, 0)


@dataclass
class Write:
    """One conditional write: ``kind`` Put (``item``), Update (``exprs.update``), Delete, or ConditionCheck."""

    kind: str
    key: tuple[str, str]
    exprs: Expressions
    keys: tuple[str, str]  # the table's key attribute names
    item: Item | None = None
    all_old_on_failure: bool = False
    size: Sizing = (0, {})  # a Put's item's (read only)

    def sized(self, new: Item | None, old: Item | None, stored: Sizing) -> Sizing:
        """The ``Sizing`` of the item after the write ((0, {}) for none), from ``stored``, the ``Sizing`` of ``old``
        (the item before it): an update's by the top-level attributes it touched, the others' sizes unchanged.

        Raises:
            RequestError: ValidationException, the item is over 400 KB.
        """
        if new is None or self.kind == "ConditionCheck":
            return 0, {}
        sized = self.size if self.kind == "Put" else self._updated(new, old, stored)
        if sized[0] > MAX_ITEM_BYTES:
            raise validation("Item size has exceeded the maximum allowed size")
        return sized

    def _updated(self, new: Item, old: Item | None, stored: Sizing) -> Sizing:
        """``sized`` of an update's ``new`` item: ``stored`` less the attributes it touched as they were, plus them
        as they are (a value set whole from a placeholder by the size ``expressions`` gave it)."""
        assert self.exprs.update is not None  # an Update write is built with its parsed expression
        if old is None:  # made by the update from its key: a few attributes, sized whole
            old = {self.keys[0]: self.key[0], self.keys[1]: self.key[1]}
            stored = (sum(len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in old.items()), {})
        size, parts = stored
        before_parts = parts
        sizes = self.exprs.sizes
        for name, token in self.exprs.update.plan(self.exprs.names, self.keys).touched.items():
            before, after = old.get(name, MISSING), new.get(name, MISSING)
            if before is after:
                continue
            if parts is before_parts:
                parts = dict(parts)
            named = len(name) if name.isascii() else len(name.encode("utf-8"))
            if before is not MISSING:
                size -= named + (parts.pop(name) if name in parts else value_bytes(before))
            if after is not MISSING:
                given = sizes.get(token, _NOT_GIVEN) if token is not None else _NOT_GIVEN
                value_size = given[1] if after is given[0] else value_bytes(after)
                size += named + value_size
                if type(after) in _CONTAINERS:
                    parts[name] = value_size
        return size, parts

    def holds(self, old: Item | None) -> bool:
        """Whether the condition holds for the stored item (None: none).

        Raises:
            EvaluationError: the condition cannot be evaluated on it.
        """
        return self.exprs.holds(self.exprs.condition, old or {})

    def result(self, old: Item | None) -> Item | None:
        """The item after the write (None: no item; a ConditionCheck leaves ``old``).

        Raises:
            EvaluationError, ExpressionError: the update cannot apply to this item.
        """
        if self.kind == "Put":
            return self.item
        if self.kind == "Delete":
            return None
        if self.kind == "ConditionCheck":
            return old
        assert self.exprs.update is not None  # an Update write is built with its parsed expression
        base = old if old is not None else {self.keys[0]: self.key[0], self.keys[1]: self.key[1]}
        return self.exprs.update.apply(base, self.exprs.names, self.exprs.values, self.keys)

    def failure_item(self, old: Item | None) -> dict[str, Any] | None:
        """``Item`` of a failed condition's answer (DynamoDB JSON), when asked for with ALL_OLD and there is one."""
        return wire(old) if self.all_old_on_failure and old is not None else None


def returned(mode: str, old: Item | None, new: Item | None, write: Write) -> Item | None:
    """What a write answers in ``Attributes`` for ``ReturnValues`` ``mode``, of the item before and after it."""
    if mode == "NONE":
        return None
    if mode == "ALL_OLD":
        return copy_item(old) if old else None
    if mode == "ALL_NEW":
        return copy_item(new) if new else None
    touched = write.exprs.update.updated(write.exprs.names) if write.exprs.update else set()
    source = (old if mode == "UPDATED_OLD" else new) or {}
    return {k: v for k, v in copy_item(source).items() if k in touched} or None
