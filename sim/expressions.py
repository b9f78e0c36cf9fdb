"""DynamoDB condition and key condition expressions for the in-memory table: a parser and an evaluator.

Follows the DynamoDB Developer Guide, "Condition expressions" and "Comparison operator and function reference"::

    condition ::= operand comparator operand | operand BETWEEN operand AND operand
                | operand IN ( operand (, operand)* ) | function
                | condition AND condition | condition OR condition | NOT condition | ( condition )
    comparator ::= = | <> | < | <= | > | >=
    function ::= attribute_exists(path) | attribute_not_exists(path) | attribute_type(path, type)
               | begins_with(path, substr) | contains(path, operand)        operand ::= path | :value | size(path)

Precedence, highest first: comparators, IN, BETWEEN, functions, parentheses, NOT, AND, OR. Keywords are case
insensitive, function names are not. Paths are ``name`` or ``#placeholder`` elements joined by ``.`` with ``[n]``
list indexes. A comparison with a missing attribute (or values of different types) is false, except ``<>``, which
is true. Parsed expressions are cached by their text (boto3's builder numbers placeholders from 0, so the product's
expressions repeat).

Errors (from ``sim.expression_syntax``, re-exported): ``ExpressionError`` for a request DynamoDB refuses as a whole
(syntax, undefined or unused placeholders: the table answers ``ValidationException``); ``EvaluationError`` (a
subclass) for one found while evaluating an item (a BETWEEN with bounds out of order, an unknown ``attribute_type``
type).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from boto3.dynamodb.types import Binary

from sim.expression_syntax import (
    Context,
    EvaluationError,
    ExpressionError,
    Operand,
    Path,
    Tokens,
    parse_operand,
)
from sim.values import MISSING, Item, compare, equal, ordered, raw, type_of

__all__ = [
    "And",
    "Between",
    "Compare",
    "Condition",
    "EvaluationError",
    "ExpressionError",
    "Function",
    "In",
    "Not",
    "Or",
    "Parsed",
    "evaluate",
    "parse_condition",
]

COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
CONDITION_FUNCTIONS = frozenset(
    {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"}
)
TYPES = frozenset({"S", "SS", "N", "NS", "B", "BS", "BOOL", "NULL", "L", "M"})
MAX_IN_OPERANDS = 100


# -- conditions ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compare:
    op: str
    left: Operand
    right: Operand

    def holds(self, ctx: Context) -> bool:
        return compare(self.op, self.left.value(ctx), self.right.value(ctx))


@dataclass(frozen=True)
class Between:
    operand: Operand
    low: Operand
    high: Operand

    def holds(self, ctx: Context) -> bool:
        low, high = self.low.value(ctx), self.high.value(ctx)
        bounds = ordered(low, high)
        if bounds is not None and bounds[0] > bounds[1]:
            raise EvaluationError(
                "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal "
                f"to lower bound; lower bound operand: {low}, upper bound operand: {high}"
            )
        x = self.operand.value(ctx)
        return compare(">=", x, low) and compare("<=", x, high)


@dataclass(frozen=True)
class In:
    operand: Operand
    options: tuple[Operand, ...]

    def holds(self, ctx: Context) -> bool:
        x = self.operand.value(ctx)
        return any(equal(x, o.value(ctx)) for o in self.options)


@dataclass(frozen=True)
class Function:
    name: str
    args: tuple[Operand, ...]

    def holds(self, ctx: Context) -> bool:
        first = self.args[0].value(ctx)
        if self.name == "attribute_exists":
            return first is not MISSING
        if self.name == "attribute_not_exists":
            return first is MISSING
        second = self.args[1].value(ctx)
        if self.name == "attribute_type":
            if second not in TYPES:
                raise EvaluationError(f"Invalid ConditionExpression: Invalid attribute type name found; type: {second}")
            return first is not MISSING and type_of(first) == second
        if self.name == "begins_with":
            if isinstance(first, str) and isinstance(second, str):
                return first.startswith(second)
            if isinstance(first, Binary) and isinstance(second, Binary):
                return raw(first).startswith(raw(second))
            return False
        # contains: a substring of a string, an element of a set or list
        if isinstance(first, str):
            return isinstance(second, str) and second in first
        if isinstance(first, Binary):
            return isinstance(second, Binary) and raw(second) in raw(first)
        if isinstance(first, set):
            return second is not MISSING and not isinstance(second, (set, list, dict)) and second in first
        if isinstance(first, list):
            return any(equal(e, second) for e in first)
        return False


@dataclass(frozen=True)
class Not:
    condition: Condition

    def holds(self, ctx: Context) -> bool:
        return not self.condition.holds(ctx)


@dataclass(frozen=True)
class And:
    left: Condition
    right: Condition

    def holds(self, ctx: Context) -> bool:
        return self.left.holds(ctx) and self.right.holds(ctx)


@dataclass(frozen=True)
class Or:
    left: Condition
    right: Condition

    def holds(self, ctx: Context) -> bool:
        return self.left.holds(ctx) or self.right.holds(ctx)


Condition = Compare | Between | In | Function | Not | And | Or


@dataclass(frozen=True)
class Parsed:
    """A parsed condition and the placeholders its text uses."""

    condition: Condition
    names: frozenset[str] = field(default_factory=frozenset)
    values: frozenset[str] = field(default_factory=frozenset)


def _or(tokens: Tokens) -> Condition:
    left = _and(tokens)
    while tokens.keyword("OR"):
        left = Or(left, _and(tokens))
    return left


def _and(tokens: Tokens) -> Condition:
    left = _not(tokens)
    while tokens.keyword("AND"):
        left = And(left, _not(tokens))
    return left


def _not(tokens: Tokens) -> Condition:
    if tokens.keyword("NOT"):
        return Not(_not(tokens))
    return _primary(tokens)


def _primary(tokens: Tokens) -> Condition:
    if tokens.op("("):
        inner = _or(tokens)
        tokens.expect(")")
        return inner
    kind, text = tokens.peek()
    if kind == "name" and text in CONDITION_FUNCTIONS and tokens.peek(1) == ("op", "("):
        return _function(tokens)
    left = parse_operand(tokens)
    kind, text = tokens.peek()
    if kind == "op" and text in COMPARATORS:
        tokens.take()
        return Compare(text, left, parse_operand(tokens))
    if tokens.keyword("BETWEEN"):
        low = parse_operand(tokens)
        if not tokens.keyword("AND"):
            raise tokens.error()
        return Between(left, low, parse_operand(tokens))
    if tokens.keyword("IN"):
        tokens.expect("(")
        options = [parse_operand(tokens)]
        while tokens.op(","):
            options.append(parse_operand(tokens))
        tokens.expect(")")
        if len(options) > MAX_IN_OPERANDS:
            raise ExpressionError(f"Invalid {tokens.what}: The IN operator takes at most {MAX_IN_OPERANDS} operands")
        return In(left, tuple(options))
    raise tokens.error()


def _function(tokens: Tokens) -> Function:
    _, name = tokens.take()
    tokens.expect("(")
    args = [parse_operand(tokens)]
    while tokens.op(","):
        args.append(parse_operand(tokens))
    tokens.expect(")")
    arity = 1 if name in ("attribute_exists", "attribute_not_exists") else 2
    if len(args) != arity:
        raise ExpressionError(
            f"Invalid {tokens.what}: Incorrect number of operands for operator or function; "
            f"operator or function: {name}, number of operands: {len(args)}"
        )
    if not isinstance(args[0], Path):
        raise ExpressionError(
            f"Invalid {tokens.what}: Operator or function requires a document path; operator or function: {name}"
        )
    return Function(name, tuple(args))


@lru_cache(maxsize=4096)
def parse_condition(text: str, what: str = "ConditionExpression") -> Parsed:
    """Parse a condition (``what`` names it in errors: ConditionExpression, KeyConditionExpression,
    FilterExpression).

    Raises:
        ExpressionError: empty or not in the grammar.
    """
    tokens = Tokens(text, what)
    if not tokens.items:
        raise ExpressionError(f"Invalid {what}: The expression can not be empty;")
    condition = _or(tokens)
    tokens.done()
    return Parsed(condition, frozenset(tokens.names), frozenset(tokens.values))


def evaluate(text: str, item: Item, names: Mapping[str, str], values: Mapping[str, Any]) -> bool:
    """Whether the condition ``text`` holds for ``item`` (``{}``: no item), placeholders from ``names`` and
    ``values`` (canonical values, ``sim.values.canonical``).

    Raises:
        ExpressionError: the expression is invalid or uses an undefined placeholder.
        EvaluationError: it cannot be evaluated on this item.
    """
    return parse_condition(text).condition.holds(Context(item, names, values))
