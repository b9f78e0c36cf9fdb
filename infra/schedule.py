"""EventBridge schedule expressions, checked at synth with EventBridge's own grammar.

Source: Amazon EventBridge User Guide, "Cron expressions reference" and "Rate expressions"
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html,
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html):

- ``cron(Minutes Hours Day-of-month Month Day-of-week Year)``: six required fields, separated by white space, times
  in UTC.

  ===============  ==================  ==============
  field            values              wildcards
  ===============  ==================  ==============
  Minutes          0-59                , - * /
  Hours            0-23                , - * /
  Day-of-month     1-31                , - * ? / L W
  Month            1-12 or JAN-DEC     , - * /
  Day-of-week      1-7 or SUN-SAT      , - * ? L #
  Year             1970-2199           , - * /
  ===============  ==================  ==============

  Day-of-month and Day-of-week cannot both be given: the one not given is ``?`` (``*`` in one needs ``?`` in the
  other). ``#`` (``3#2``: the second Tuesday) admits one expression only in its field; ``L`` is the last day of the
  month or week (``6L`` the last Friday); ``W`` the weekday nearest a day of the month (``3W``, ``LW``).
- ``rate(value unit)``: a positive whole number and ``minute``/``hour``/``day`` for 1, ``minutes``/``hours``/
  ``days`` above 1.

A cron that fires more often than once a minute is impossible in this grammar (no seconds field), so that
restriction needs no check of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_RATE_RE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON_RE = re.compile(r"^cron\((.*)\)$")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # JAN..DEC / SUN..SAT, numbered from ``low``
    any_ok: bool = False  # ``?``
    last_ok: bool = False  # ``L``
    weekday_ok: bool = False  # ``W`` (Day-of-month)
    nth_ok: bool = False  # ``#`` (Day-of-week)


FIELDS = (
    _Field("Minutes", 0, 59),
    _Field("Hours", 0, 23),
    _Field("Day-of-month", 1, 31, any_ok=True, last_ok=True, weekday_ok=True),
    _Field("Month", 1, 12, names=MONTHS),
    _Field("Day-of-week", 1, 7, names=DAYS, any_ok=True, last_ok=True, nth_ok=True),
    _Field("Year", 1970, 2199),
)


def validate_schedule(expression: str) -> str:
    """``expression`` when it is a valid EventBridge schedule expression.

    Raises:
        ValueError: what is wrong, naming the field (``Day-of-week``, ...) or the rate's part.
    """
    if expression.startswith("rate("):
        _check_rate(expression)
        return expression
    match = _CRON_RE.match(expression)
    if not match:
        raise ValueError(f"{expression!r} is neither cron(...) nor rate(...)")
    fields = match.group(1).split()
    if len(fields) != len(FIELDS):
        raise ValueError(
            f"{expression!r} has {len(fields)} fields; EventBridge's cron has 6: "
            "Minutes Hours Day-of-month Month Day-of-week Year"
        )
    for spec, text in zip(FIELDS, fields, strict=True):
        _check_field(spec, text)
    dom, dow = fields[2], fields[4]
    if (dom == "?") == (dow == "?"):
        raise ValueError(
            f"{expression!r}: exactly one of Day-of-month ({dom}) and Day-of-week ({dow}) must be '?' "
            "(a value or * in one needs ? in the other)"
        )
    return expression


def _check_rate(expression: str) -> None:
    match = _RATE_RE.match(expression)
    if not match:
        raise ValueError(f"{expression!r} is not rate(<value> <minute(s)|hour(s)|day(s)>)")
    value, unit = int(match.group(1)), match.group(2)
    if value < 1:
        raise ValueError(f"{expression!r}: the rate's value must be a positive whole number")
    if (value == 1) != (not unit.endswith("s")):
        raise ValueError(f"{expression!r}: the unit is singular for 1 and plural above (rate(1 day), rate(2 days))")


def _check_field(spec: _Field, text: str) -> None:
    def bad(why: str) -> ValueError:
        return ValueError(f"{spec.name} {text!r}: {why}")

    if text == "?":
        if not spec.any_ok:
            raise bad("'?' is allowed only in Day-of-month and Day-of-week")
        return
    items = text.split(",")
    if "#" in text and (not spec.nth_ok or len(items) > 1):
        raise bad("'#' is allowed only in Day-of-week, as its only expression")
    for item in items:
        if not item:
            raise bad("empty list item")
        _check_item(spec, item, bad)


def _check_item(spec: _Field, item: str, err: Callable[[str], ValueError]) -> None:
    if item == "*":
        return
    if item == "L" or (spec.last_ok and item == "LW" and spec.weekday_ok):
        if not spec.last_ok:
            raise err("'L' is allowed only in Day-of-month and Day-of-week")
        return
    if spec.nth_ok and "#" in item:
        day, _, nth = item.partition("#")
        _value(spec, day, err)
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise err("the week after '#' is 1 to 5")
        return
    if item.endswith("W") and spec.weekday_ok:
        _value(spec, item[:-1], err)
        return
    if item.endswith("L") and spec.last_ok and spec.nth_ok:  # 6L: the last Friday
        _value(spec, item[:-1], err)
        return
    base, slash, step = item.partition("/")
    if slash:
        if not step.isdigit() or int(step) < 1:
            raise err("the increment after '/' is a positive whole number")
        if spec.nth_ok:
            raise err("'/' is not a Day-of-week wildcard")
        if base == "*":
            return
    first, dash, last = base.partition("-")
    low = _value(spec, first, err)
    if dash:
        high = _value(spec, last, err)
        if high < low:
            raise err(f"range {base} runs backwards")


def _value(spec: _Field, text: str, err: Callable[[str], ValueError]) -> int:
    if text.upper() in spec.names and text == text.upper():
        return spec.low + spec.names.index(text)
    if not text.isdigit():
        names = f" or {spec.names[0]}-{spec.names[-1]}" if spec.names else ""
        raise err(f"{text!r} is not a value ({spec.low}-{spec.high}{names})")
    value = int(text)
    if not spec.low <= value <= spec.high:
        raise err(f"{value} is outside {spec.low}-{spec.high}")
    return value
