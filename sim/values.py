"""DynamoDB attribute values as the in-memory table holds them: the Python values boto3's resource layer returns.

Values enter through boto3's own ``TypeSerializer`` and come back through its ``TypeDeserializer`` (``canonical``),
so the table accepts and refuses exactly what a boto3 ``Table`` resource does (``float`` raises ``TypeError`` before
any call, as in boto3) and stores numbers as ``Decimal``, binary as ``Binary``, sets as ``set``, lists and maps as
``list`` / ``dict``. Comparisons follow the DynamoDB Developer Guide, "Comparison operator and function reference"
(ordering only between two values of the same scalar type N, S or B; strings by UTF-8 bytes, which is Python's code
point order). Item sizes follow "Item sizes and formats" (names + values; numbers by significant digits).
"""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Any

from boto3.dynamodb.types import DYNAMODB_CONTEXT, Binary, TypeDeserializer, TypeSerializer

Item = dict[str, Any]

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()

# DynamoDB's 38 significant digits, without boto3's traps: a number the serializer let in has at most 38, so
# normalising it in this context never rounds (Python's default context has 28)
_PRECISION = DYNAMODB_CONTEXT.copy()
_PRECISION.clear_traps()
MAX_ITEM_BYTES = 400 * 1024  # "Service, account, and table quotas in Amazon DynamoDB": item size


class Missing:
    """The value of a document path that does not exist in the item (a singleton, ``MISSING``)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()


def canonical(value: Any) -> Any:
    """``value`` as boto3 would give it back after a round trip through DynamoDB: numbers as ``Decimal`` with
    leading and trailing zeroes trimmed ("Supported data types and naming rules in Amazon DynamoDB", Number:
    ``Decimal("1.50")`` comes back as ``Decimal("1.5")``, ``Decimal("1000.0")`` as ``Decimal("1000")``).

    Raises:
        TypeError: a type boto3 refuses (``float``, unsupported objects), as boto3 raises before the call.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:  # what the round trip gives back unchanged (the same object)
        return value
    if kind is dict:  # a map: its values one by one, as the serializer and the deserializer treat them
        return {k: canonical(v) for k, v in value.items()}
    if kind is list:
        return [_canonical_row(v) if type(v) is list else canonical(v) for v in value]
    if kind is int and -SMALL_INT < value < SMALL_INT:  # what the round trip below gives: its Decimal (exponent 0)
        return Decimal(value)
    if kind is Decimal or kind is int:  # a number: the round trip of the same text is the same number
        key = (kind, str(value))
        number = _NUMBERS.get(key)
        if number is None:
            number = _trimmed(_DESERIALIZER.deserialize(_SERIALIZER.serialize(value)))  # raises as boto3 does
            if len(_NUMBERS) >= _NUMBERS_KEPT:
                _NUMBERS.clear()
            _NUMBERS[key] = number
        return number
    return _trimmed(_DESERIALIZER.deserialize(_SERIALIZER.serialize(value)))


# an ``int`` of fewer digits than this bound's is exactly its ``Decimal`` after the round trip: boto3 sends it as its
# digits (at most 38 significant, so nothing rounded) and reads them back; ``_trimmed`` gives the same digits back
# (with exponent 0, as ``Decimal(int)`` has) where a number of trailing zeroes would come back with an exponent
SMALL_INT = 10**27
# canonical numbers by (type, text): a pure memo (same text in, same Decimal out), bounded, shared by every run
_NUMBERS: dict[tuple[type, str], Decimal] = {}
_NUMBERS_KEPT = 4096
# a list of scalars by its content (values and their exact types: ``True``, ``1`` and ``Decimal(1)`` are equal in
# Python) -> its canonical values and its size: pure memos, bounded, shared by every run; a large ``RUN#`` item's
# rows (``core.runrecord``) are written again and again with the same content
_ROW_SCALARS = frozenset({str, int, bool, type(None), Decimal})
_ROWS: dict[tuple[tuple[Any, ...], tuple[type, ...]], tuple[Any, ...]] = {}
_ROW_BYTES: dict[tuple[tuple[Any, ...], tuple[type, ...]], int] = {}
_ROWS_KEPT = 50_000


def _row_key(values: list[Any]) -> tuple[tuple[Any, ...], tuple[type, ...]] | None:
    types = tuple(map(type, values))
    return (tuple(values), types) if _ROW_SCALARS.issuperset(types) else None


def _canonical_row(values: list[Any]) -> list[Any]:
    """``canonical`` of a list inside a list, a list of scalars remembered by its content (a new list each time)."""
    key = _row_key(values)
    if key is None:
        return [canonical(v) for v in values]
    row = _ROWS.get(key)
    if row is None:
        row = tuple(canonical(v) for v in values)
        if len(_ROWS) >= _ROWS_KEPT:
            _ROWS.clear()
        _ROWS[key] = row
    return list(row)


def _trimmed(value: Any) -> Any:
    """``value`` with its numbers' leading and trailing zeroes trimmed as DynamoDB gives them back, at DynamoDB's
    precision (38 significant digits, boto3's ``DYNAMODB_CONTEXT``: "Supported data types", Number). Python's default
    context keeps 28 and would round a longer number the service stores exactly (``10**28 + 1`` came back as
    ``1E+28``)."""
    if isinstance(value, Decimal):
        return Decimal(format(value.normalize(_PRECISION), "f")) if value else Decimal(0)
    if isinstance(value, dict):
        return {k: _trimmed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trimmed(v) for v in value]
    if isinstance(value, set) and value and isinstance(next(iter(value)), Decimal):
        return {_trimmed(v) for v in value}
    return value


class NumberRefused(ValueError):
    """A number DynamoDB refuses to store (its ``ValidationException`` message)."""


# DynamoDB's numbers ("Supported data types and naming rules", Number: "up to 38 digits of precision. Exceeding this
# results in an exception"; positive range 1E-130 to 9.9999999999999999999999999999999999999E+125, negative the same)
_LARGEST = Decimal("9.9999999999999999999999999999999999999E+125")
_SMALLEST = Decimal("1E-130")
# a sum of two of them, exact: their digits span at most 126 + 130 + 37 places
_EXACT = Context(prec=400, Emax=999, Emin=-999, traps=[])
# DynamoDB's words for a result it cannot store, as ScyllaDB's Alternator tests recorded them against DynamoDB
# (test/alternator/test_number.py: ``9e125 + 9e125`` and ``1e50 + 1`` alike, although the second is a precision)
OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
UNDERFLOW = "Number underflow. Attempting to store a number with magnitude smaller than supported range"


def number_sum(a: Decimal, b: Decimal, subtract: bool = False) -> Decimal:
    """``a + b`` (``a - b`` when ``subtract``) as an update expression's ``+``, ``-`` or ``ADD`` stores it: exact,
    trimmed as any stored number (``canonical``: ``1.5 + 1.5`` is ``3``).

    Raises:
        NumberRefused: a sum DynamoDB cannot store: more than 38 significant digits (``1e50 + 1``) or a magnitude
            past 9.99...E+125 (``OVERFLOW``), or a non-zero one below 1E-130 (``UNDERFLOW``).
    """
    total = _EXACT.subtract(a, b) if subtract else _EXACT.add(a, b)
    if not total:
        return Decimal(0)
    total = total.normalize(_EXACT)
    if abs(total) > _LARGEST or len(total.as_tuple().digits) > _PRECISION.prec:
        raise NumberRefused(OVERFLOW)
    if abs(total) < _SMALLEST:
        raise NumberRefused(UNDERFLOW)
    return Decimal(format(total, "f"))


def canonical_item(item: Item) -> Item:
    return {str(k): canonical(v) for k, v in item.items()}


def wire(item: Item) -> dict[str, Any]:
    """An item in DynamoDB JSON (``{"S": ...}``), as error answers carry it (``Item`` of a failed condition)."""
    return {k: _SERIALIZER.serialize(v) for k, v in item.items()}


_SCALARS = frozenset({str, Decimal, bool, type(None), Binary})


def copy_value(value: Any) -> Any:
    """A deep copy of a stored value (scalars are immutable and shared). Stored values are exactly the types
    ``canonical`` gives, so ``type()`` (not ``isinstance``) tells them apart."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else copy_value(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else copy_value(v) for v in value]
    if kind is set:
        return set(value)
    return value


def copy_item(item: Item) -> Item:
    """A deep copy of a stored item (its scalars shared: they are immutable)."""
    return {k: v if type(v) in _SCALARS else copy_value(v) for k, v in item.items()}


def type_of(value: Any) -> str:
    """The DynamoDB data type descriptor of a canonical value: S, N, B, BOOL, NULL, L, M, SS, NS, BS."""
    if isinstance(value, bool):
        return "BOOL"
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "S"
    if isinstance(value, Decimal):
        return "N"
    if isinstance(value, Binary):
        return "B"
    if isinstance(value, list):
        return "L"
    if isinstance(value, dict):
        return "M"
    if isinstance(value, set):
        first = next(iter(value))
        return {"S": "SS", "N": "NS", "B": "BS"}[type_of(first)]
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def raw(value: Any) -> bytes:
    """The bytes of a ``Binary`` (boto3's stubs do not declare its ``__bytes__``)."""
    return bytes(value)


def step(current: Any, part: str | int) -> Any:
    """The element ``part`` (a map key or a list index) of ``current``; MISSING when there is none."""
    if isinstance(part, str):
        return current.get(part, MISSING) if isinstance(current, dict) else MISSING
    return current[part] if isinstance(current, list) and part < len(current) else MISSING


def _order_key(value: Any) -> Any:
    return raw(value) if isinstance(value, Binary) else value


def equal(a: Any, b: Any) -> bool:
    """``a = b``: both present, same type, same value (sets as sets, lists and maps element-wise)."""
    if a is MISSING or b is MISSING:
        return False
    ta, tb = type_of(a), type_of(b)
    if ta != tb:
        return False
    if ta == "L":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if ta == "M":
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return bool(a == b)


def ordered(a: Any, b: Any) -> tuple[Any, Any] | None:
    """The pair's order keys when ``a`` and ``b`` may be ordered (both present, same type N, S or B), else None."""
    if a is MISSING or b is MISSING:
        return None
    ta = type_of(a)
    if ta not in ("N", "S", "B") or type_of(b) != ta:
        return None
    return _order_key(a), _order_key(b)


def compare(op: str, a: Any, b: Any) -> bool:
    """``a op b`` for a comparator ``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``.

    ``<>`` is true when the values differ in any way, including a missing attribute (DynamoDB evaluates
    ``#a <> :v`` to true for an item without ``a``).
    """
    if op == "=":
        return equal(a, b)
    if op == "<>":
        return not equal(a, b)
    pair = ordered(a, b)
    if pair is None:
        return False
    x, y = pair
    if op == "<":
        return bool(x < y)
    if op == "<=":
        return bool(x <= y)
    if op == ">":
        return bool(x > y)
    return bool(x >= y)


def size_of(value: Any) -> Any:
    """``size(path)``: the length of an S, the bytes of a B, the elements of a set, list or map; MISSING for other
    types or a missing path (a comparison with it is false)."""
    if isinstance(value, str):
        return Decimal(len(value))
    if isinstance(value, Binary):
        return Decimal(len(raw(value)))
    if isinstance(value, (set, list, dict)):
        return Decimal(len(value))
    return MISSING


def _number_bytes(value: Decimal) -> int:
    size = _NUMBER_BYTES.get(value)
    if size is None:
        size = (len(value.normalize(_PRECISION).as_tuple().digits) + 1) // 2 + 1
        if len(_NUMBER_BYTES) >= _NUMBERS_KEPT:
            _NUMBER_BYTES.clear()
        _NUMBER_BYTES[value] = size
    return size


# the size of a number by its value: a pure memo (equal Decimals, 1 and 1.0 alike, normalise to the same digits),
# bounded, shared by every run as ``_NUMBERS`` is; a RUN# item's rows are thousands of small numbers a save
_NUMBER_BYTES: dict[Decimal, int] = {}


def value_bytes(value: Any) -> int:
    """The stored size of one value ("Item sizes and formats"; an approximation exact for S, B, BOOL, NULL)."""
    kind = type(value)  # the common canonical types first, by exact type
    if kind is str:
        return len(value) if value.isascii() else len(value.encode("utf-8"))
    if kind is Decimal:
        return _number_bytes(value)
    if kind is list:
        return 3 + sum(1 + (_row_bytes(v) if type(v) is list else value_bytes(v)) for v in value)
    if kind is dict:
        return 3 + sum(1 + len(k.encode("utf-8")) + value_bytes(v) for k, v in value.items())
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, Decimal):
        return _number_bytes(value)
    if isinstance(value, Binary):
        return len(raw(value))
    if isinstance(value, set):
        return sum(value_bytes(v) for v in value)
    if isinstance(value, list):
        return 3 + sum(1 + value_bytes(v) for v in value)
    if isinstance(value, dict):
        return 3 + sum(1 + len(k.encode("utf-8")) + value_bytes(v) for k, v in value.items())
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def _row_bytes(values: list[Any]) -> int:
    """``value_bytes`` of a list inside a list, a list of scalars remembered by its content."""
    key = _row_key(values)
    if key is None:
        return 3 + sum(1 + value_bytes(v) for v in values)
    size = _ROW_BYTES.get(key)
    if size is None:
        size = 3 + sum(1 + value_bytes(v) for v in values)
        if len(_ROW_BYTES) >= _ROWS_KEPT:
            _ROW_BYTES.clear()
        _ROW_BYTES[key] = size
    return size


def item_bytes(item: Item) -> int:
    """An item's size: each attribute's name (UTF-8 bytes) plus its value."""
    return sum(len(k.encode("utf-8")) + value_bytes(v) for k, v in item.items())
