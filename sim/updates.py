"""DynamoDB update expressions for the in-memory table: a parser and how one changes an item.

Follows the DynamoDB Developer Guide, "Update expressions"::

    update ::= [SET action (, action)*] [REMOVE path (, path)*] [ADD path value (, ...)*] [DELETE path value (, ...)*]
    set action ::= path = value        value ::= operand | operand + operand | operand - operand
    operand ::= path | :value | if_not_exists(path, value) | list_append(operand, operand)

Each clause at most once, in any order; keywords are case insensitive. Every right-hand side reads the item as it
was before the update, then all actions apply together. Two actions on overlapping paths, an update of a key
attribute, arithmetic on a non-number, a missing attribute on the right-hand side, or a nested path whose parent is
missing are refused (``EvaluationError`` / ``ExpressionError``: the table answers ``ValidationException``).
Arithmetic (``+``, ``-``, ``ADD``) is exact and its result is stored as a put would store it; a result DynamoDB
cannot store (more than 38 significant digits, or out of its range) is refused as it refuses it
(``sim.values.number_sum``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sim.expression_syntax import Context, EvaluationError, ExpressionError, Path, Tokens, Value, parse_path
from sim.values import MISSING, Item, NumberRefused, copy_value, number_sum, step, type_of

CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
WHAT = "UpdateExpression"


@dataclass(frozen=True)
class IfNotExists:
    path: Path
    default: Term

    def value(self, ctx: Context) -> Any:
        current = self.path.value(ctx)
        return self.default.value(ctx) if current is MISSING else current


@dataclass(frozen=True)
class ListAppend:
    first: Term
    second: Term

    def value(self, ctx: Context) -> Any:
        a, b = self.first.value(ctx), self.second.value(ctx)
        if not isinstance(a, list) or not isinstance(b, list):
            raise EvaluationError(
                "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: "
                "list_append"
            )
        return [*a, *b]


Term = Path | Value | IfNotExists | ListAppend


@dataclass(frozen=True)
class Arithmetic:
    op: str
    left: Term
    right: Term

    def value(self, ctx: Context) -> Any:
        a, b = _present(self.left.value(ctx)), _present(self.right.value(ctx))
        if not isinstance(a, Decimal) or not isinstance(b, Decimal):
            raise EvaluationError(
                f"An operand in the update expression has an incorrect data type; operator or function: {self.op}"
            )
        return _sum(a, b, subtract=self.op == "-")


def _sum(a: Any, b: Any, subtract: bool = False) -> Any:
    """``number_sum``, a sum DynamoDB cannot store refused as it refuses it (``ValidationException``)."""
    try:
        return number_sum(a, b, subtract)
    except NumberRefused as err:
        raise EvaluationError(str(err)) from None


def _present(value: Any) -> Any:
    if value is MISSING:
        raise EvaluationError("The provided expression refers to an attribute that does not exist in the item")
    return value


Resolved = tuple[str | int, ...]  # a document path with its name placeholders resolved


@dataclass(frozen=True)
class Plan:
    """An update's actions with their paths resolved and checked for one request's name placeholders and one table's
    key attributes (``Update.plan``)."""

    sets: tuple[tuple[Resolved, Term | Arithmetic], ...]
    removes: tuple[Resolved, ...]  # later list indexes first, so that earlier ones still point where they did
    adds: tuple[tuple[Resolved, Value], ...]
    deletes: tuple[tuple[Resolved, Value], ...]
    touched: dict[str, str | None]  # the top-level attributes touched, each with the placeholder set whole, if any
    whole: tuple[tuple[str, str], ...] | None  # (attribute, placeholder) when every action is ``SET a = :v``

    def apply(self, item: Item, names: Mapping[str, str], values: Mapping[str, Any]) -> Item:
        """``Update.apply``."""
        ctx = Context(item, names, values)
        out = dict(item)
        if self.whole is not None:
            for name, token in self.whole:
                out[name] = ctx.value(token)
            return out
        new_values = [(parts, _present(term.value(ctx))) for parts, term in self.sets]
        owned: set[int] = set()  # the lists and maps of ``out`` that are this update's own copies
        for parts, value in new_values:
            _set(_parent(out, parts, owned), parts[-1], value)
        for parts in self.removes:
            _remove(_parent(out, parts, owned), parts[-1])
        for parts, operand in self.adds:
            _add(out, parts, operand.value(ctx))
        for parts, operand in self.deletes:
            _delete(out, parts, operand.value(ctx))
        return out


_PLANS_KEPT = 64  # an update's plans, one per set of name placeholders and key attributes (a request's shape)


@dataclass(frozen=True)
class Update:
    """A parsed update expression and the placeholders its text uses."""

    sets: tuple[tuple[Path, Term | Arithmetic], ...]
    removes: tuple[Path, ...]
    adds: tuple[tuple[Path, Value], ...]
    deletes: tuple[tuple[Path, Value], ...]
    names: frozenset[str]
    values: frozenset[str]
    # (names' items, keys) -> its plan: a pure memo (the paths follow from the names alone), bounded
    _plans: dict[tuple[Any, ...], Plan] = field(default_factory=dict, compare=False, repr=False)

    def apply(self, item: Item, names: Mapping[str, str], values: Mapping[str, Any], keys: tuple[str, ...]) -> Item:
        """The item after the update: a new dict; ``item`` is left as it was (``{}`` for none). Every list and map of
        ``item`` the update does not change is the new item's too, and a value set is the one the placeholders or
        the item hold, not a copy (neither is ever changed in place: a list or map the update changes inside is
        copied first, once).

        Raises:
            ExpressionError: overlapping paths or a key attribute updated.
            EvaluationError: the update cannot apply to this item.
        """
        return self.plan(names, keys).apply(item, names, values)

    def plan(self, names: Mapping[str, str], keys: tuple[str, ...]) -> Plan:
        """The update's paths resolved with ``names`` and checked against the table's ``keys`` (once per shape).

        Raises:
            ExpressionError: an undefined name placeholder, overlapping paths or a key attribute updated.
        """
        key = (tuple(names.items()), keys)
        known = self._plans.get(key)
        if known is not None:
            return known
        ctx = Context({}, names, {})
        sets = tuple((p.resolve(ctx), term) for p, term in self.sets)
        removes = [p.resolve(ctx) for p in self.removes]
        adds = tuple((p.resolve(ctx), operand) for p, operand in self.adds)
        deletes = tuple((p.resolve(ctx), operand) for p, operand in self.deletes)
        _check_paths([*(p for p, _ in sets), *removes, *(p for p, _ in adds), *(p for p, _ in deletes)], keys)
        touched: dict[str, str | None] = {
            str(parts[0]): term.token if len(parts) == 1 and isinstance(term, Value) else None for parts, term in sets
        }
        touched.update((str(p[0]), None) for p in (*removes, *(p for p, _ in adds), *(p for p, _ in deletes)))
        whole = None
        if len(touched) == len(sets) and all(touched.values()):  # only ``SET a = :v`` actions
            whole = tuple((name, str(token)) for name, token in touched.items())
        plan = Plan(sets, tuple(sorted(removes, key=_path_order, reverse=True)), adds, deletes, touched, whole)
        if len(self._plans) >= _PLANS_KEPT:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def updated(self, names: Mapping[str, str]) -> set[str]:
        """The top-level attributes the update touches (ReturnValues UPDATED_OLD / UPDATED_NEW)."""
        return set(self.touched(names))

    def touched(self, names: Mapping[str, str]) -> dict[str, str | None]:
        """The top-level attributes the update touches, each with the placeholder it is set to whole (``SET a =
        :v``), if it is."""
        ctx = Context({}, names, {})
        out: dict[str, str | None] = {}
        for path, term in self.sets:
            parts = path.resolve(ctx)
            out[str(parts[0])] = term.token if len(parts) == 1 and isinstance(term, Value) else None
        for path in (*self.removes, *(p for p, _ in self.adds), *(p for p, _ in self.deletes)):
            out[str(path.resolve(ctx)[0])] = None
        return out


def _check_paths(paths: list[tuple[str | int, ...]], keys: tuple[str, ...]) -> None:
    for parts in paths:
        if parts[0] in keys:
            raise ExpressionError(f"Cannot update attribute {parts[0]}. This attribute is part of the key")
    for i, one in enumerate(paths):
        for two in paths[i + 1 :]:
            n = min(len(one), len(two))
            if one[:n] == two[:n]:
                raise ExpressionError(
                    "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one "
                    f"of these paths; path one: {list(one)}, path two: {list(two)}"
                )


_INVALID_PATH = "The document path provided in the update expression is invalid for update"


def _parent(item: Item, parts: tuple[str | int, ...], owned: set[int]) -> Any:
    """The list or map that holds the element ``parts`` names in ``item`` (the update's own), each list and map on
    the way made the update's own copy first (``owned``: their ids); MISSING when the way is not there."""
    current: Any = item
    for part in parts[:-1]:
        child = step(current, part)
        if child is MISSING:
            return MISSING
        kind = type(child)
        if (kind is dict or kind is list) and id(child) not in owned:
            child = kind(child)
            owned.add(id(child))
            current[part] = child  # ``current`` is the update's own: ``item`` itself or a copy made here
        current = child
    return current


def _set(parent: Any, last: str | int, value: Any) -> None:
    if isinstance(last, str) and isinstance(parent, dict):
        parent[last] = value
    elif isinstance(last, int) and isinstance(parent, list):
        if last < len(parent):
            parent[last] = value
        else:
            parent.append(value)  # an index past the end appends
    else:
        raise EvaluationError(_INVALID_PATH)


def _remove(parent: Any, last: str | int) -> None:
    if parent is MISSING:
        return  # removing what is not there changes nothing
    if isinstance(last, str) and isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(last, int) and isinstance(parent, list):
        if last < len(parent):
            del parent[last]
    else:
        raise EvaluationError(_INVALID_PATH)


def _path_order(parts: tuple[str | int, ...]) -> tuple[tuple[bool, str | int], ...]:
    """A sort key for resolved paths (names and indexes never compared with each other)."""
    return tuple((isinstance(p, int), p) for p in parts)


def _add(item: Item, parts: tuple[str | int, ...], value: Any) -> None:
    if len(parts) != 1:
        raise EvaluationError("Invalid UpdateExpression: ADD is supported on top-level attributes only")
    name = str(parts[0])
    current = item.get(name, MISSING)
    kind = type_of(value)
    if kind not in ("N", "SS", "NS", "BS"):
        raise EvaluationError(
            "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD"
        )
    if current is MISSING:
        item[name] = copy_value(value)
    elif type_of(current) != kind:
        raise EvaluationError("An operand in the update expression has an incorrect data type")
    else:
        item[name] = _sum(current, value) if kind == "N" else current | value


def _delete(item: Item, parts: tuple[str | int, ...], value: Any) -> None:
    if len(parts) != 1:
        raise EvaluationError("Invalid UpdateExpression: DELETE is supported on top-level attributes only")
    name = str(parts[0])
    current = item.get(name, MISSING)
    kind = type_of(value)
    if kind not in ("SS", "NS", "BS"):
        raise EvaluationError(
            "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: DELETE"
        )
    if current is MISSING:
        return
    if type_of(current) != kind:
        raise EvaluationError("An operand in the update expression has an incorrect data type")
    left = current - value
    if left:
        item[name] = left
    else:
        del item[name]  # an empty set is no value


def _term(tokens: Tokens) -> Term:
    kind, text = tokens.peek()
    if kind == "vph":
        tokens.take()
        return Value(text)
    if kind == "name" and text in ("if_not_exists", "list_append") and tokens.peek(1) == ("op", "("):
        tokens.take()
        tokens.take()
        if text == "if_not_exists":
            path = parse_path(tokens)
            tokens.expect(",")
            default = _term(tokens)
            tokens.expect(")")
            return IfNotExists(path, default)
        first = _term(tokens)
        tokens.expect(",")
        second = _term(tokens)
        tokens.expect(")")
        return ListAppend(first, second)
    return parse_path(tokens)


def _set_value(tokens: Tokens) -> Term | Arithmetic:
    left = _term(tokens)
    for op in ("+", "-"):
        if tokens.op(op):
            return Arithmetic(op, left, _term(tokens))
    return left


def _value(tokens: Tokens) -> Value:
    kind, text = tokens.take()
    if kind != "vph":
        tokens.pos -= 1
        raise tokens.error()
    return Value(text)


@lru_cache(maxsize=4096)
def parse_update(text: str) -> Update:
    """Parse an update expression.

    Raises:
        ExpressionError: empty, a clause twice, or not in the grammar.
    """
    tokens = Tokens(text, WHAT)
    if not tokens.items:
        raise ExpressionError(f"Invalid {WHAT}: The expression can not be empty;")
    sets: list[tuple[Path, Term | Arithmetic]] = []
    removes: list[Path] = []
    adds: list[tuple[Path, Value]] = []
    deletes: list[tuple[Path, Value]] = []
    seen: set[str] = set()
    while tokens.peek()[0] != "end":
        kind, word = tokens.take()
        clause = word.upper()
        if kind != "name" or clause not in CLAUSES:
            tokens.pos -= 1
            raise tokens.error()
        if clause in seen:
            raise ExpressionError(
                f'Invalid {WHAT}: The "{clause}" section can only be used once in an update expression;'
            )
        seen.add(clause)
        while True:
            path = parse_path(tokens)
            if clause == "SET":
                tokens.expect("=")
                sets.append((path, _set_value(tokens)))
            elif clause == "REMOVE":
                removes.append(path)
            elif clause == "ADD":
                adds.append((path, _value(tokens)))
            else:
                deletes.append((path, _value(tokens)))
            if not tokens.op(","):
                break
    return Update(
        tuple(sets), tuple(removes), tuple(adds), tuple(deletes), frozenset(tokens.names), frozenset(tokens.values)
    )
