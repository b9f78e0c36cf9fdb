"""The lexical layer shared by the in-memory DynamoDB's expressions (``sim.expressions`` for conditions,
``sim.updates`` for updates): tokens, document paths, operands, the evaluation context and the errors.

From the DynamoDB Developer Guide, "Specifying item attributes when using expressions" (document paths: names or
``#placeholders`` joined by ``.``, ``[n]`` list indexes), "Expression attribute names" and "Expression attribute
values" (``:placeholders``). Keywords are case insensitive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.reserved_words import RESERVED_WORDS
from sim.values import MISSING, Item, size_of, step

KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN"})

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<nph>#[A-Za-z0-9_]+)|(?P<vph>:[A-Za-z0-9_]+)"
    r"|(?P<op><>|<=|>=|[=<>(),.\[\]+\-]))"
)


class ExpressionError(ValueError):
    """The expression (or its placeholders) is invalid: DynamoDB refuses the request (``ValidationException``)."""


class EvaluationError(ExpressionError):
    """An expression that cannot be evaluated on this item (DynamoDB answers ``ValidationException``; inside a
    transaction the item's cancellation reason is ``ValidationError``)."""


@dataclass
class Context:
    """What an expression is evaluated against: the item (``{}`` for none) and the request's placeholders."""

    item: Item
    names: Mapping[str, str]
    values: Mapping[str, Any]

    def name(self, token: str) -> str:
        if token.startswith("#"):
            if token not in self.names:
                raise ExpressionError(
                    f"An expression attribute name used in the document path is not defined; attribute name: {token}"
                )
            return self.names[token]
        return token

    def value(self, token: str) -> Any:
        if token not in self.values:
            raise ExpressionError(
                f"An expression attribute value used in expression is not defined; attribute value: {token}"
            )
        return self.values[token]


# -- tokens -------------------------------------------------------------------------------------------------------


class Tokens:
    """The tokens of one expression, and the placeholders it uses."""

    def __init__(self, text: str, what: str) -> None:
        self.what = what
        self.items: list[tuple[str, str]] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ExpressionError(f"Invalid {what}: Syntax error; token: {text[pos:].strip()[:1]!r}")
            kind = m.lastgroup or ""
            self.items.append((kind, m.group(kind)))
            pos = m.end()
        self.pos = 0
        self.names: set[str] = {t for k, t in self.items if k == "nph"}
        self.values: set[str] = {t for k, t in self.items if k == "vph"}

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        i = self.pos + ahead
        return self.items[i] if i < len(self.items) else ("end", "<EOF>")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.pos += 1
        return token

    def keyword(self, word: str) -> bool:
        kind, text = self.peek()
        if kind == "name" and text.upper() == word:
            self.pos += 1
            return True
        return False

    def op(self, symbol: str) -> bool:
        if self.peek() == ("op", symbol):
            self.pos += 1
            return True
        return False

    def expect(self, symbol: str) -> None:
        if not self.op(symbol):
            raise self.error()

    def error(self) -> ExpressionError:
        return ExpressionError(f"Invalid {self.what}: Syntax error; token: {self.peek()[1]!r}")

    def done(self) -> None:
        if self.peek()[0] != "end":
            raise self.error()


# -- operands -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Path:
    """A document path: attribute names (or ``#placeholders``) and list indexes."""

    parts: tuple[str | int, ...]

    def resolve(self, ctx: Context) -> tuple[str | int, ...]:
        return tuple(ctx.name(p) if isinstance(p, str) else p for p in self.parts)

    def value(self, ctx: Context) -> Any:
        current: Any = ctx.item
        for part in self.resolve(ctx):
            current = step(current, part)
            if current is MISSING:
                break
        return current


@dataclass(frozen=True)
class Value:
    """An ``:placeholder`` of ExpressionAttributeValues."""

    token: str

    def value(self, ctx: Context) -> Any:
        return ctx.value(self.token)


@dataclass(frozen=True)
class Size:
    """``size(path)``."""

    path: Path

    def value(self, ctx: Context) -> Any:
        return size_of(self.path.value(ctx))


Operand = Path | Value | Size


def parse_path(tokens: Tokens) -> Path:
    """A document path. An attribute name that is a reserved word (``sim.reserved_words``) is refused as DynamoDB
    refuses it: it must be written through an ``#name`` placeholder.

    Raises:
        ExpressionError: not a path, or a reserved word in it.
    """
    kind, text = tokens.take()
    if kind not in ("name", "nph") or text.upper() in KEYWORDS:
        tokens.pos -= 1
        raise tokens.error()
    _unreserved(tokens, kind, text)
    parts: list[str | int] = [text]
    while True:
        if tokens.op("."):
            kind, text = tokens.take()
            if kind not in ("name", "nph"):
                tokens.pos -= 1
                raise tokens.error()
            _unreserved(tokens, kind, text)
            parts.append(text)
        elif tokens.op("["):
            kind, text = tokens.take()
            if kind != "num":
                tokens.pos -= 1
                raise tokens.error()
            parts.append(int(text))
            tokens.expect("]")
        else:
            return Path(tuple(parts))


def _unreserved(tokens: Tokens, kind: str, text: str) -> None:
    if kind == "name" and text.upper() in RESERVED_WORDS:
        raise ExpressionError(f"Invalid {tokens.what}: Attribute name is a reserved keyword; reserved keyword: {text}")


def parse_operand(tokens: Tokens) -> Operand:
    kind, text = tokens.peek()
    if kind == "vph":
        tokens.take()
        return Value(text)
    if kind == "name" and text == "size" and tokens.peek(1) == ("op", "("):
        tokens.take()
        tokens.take()
        path = parse_path(tokens)
        tokens.expect(")")
        return Size(path)
    return parse_path(tokens)
