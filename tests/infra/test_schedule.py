"""EventBridge's schedule grammar at synth (infra.schedule), against the examples and rules of the EventBridge User
Guide, "Cron expressions reference" and "Rate expressions"."""

from __future__ import annotations

import pytest

from core.exceptions import SettingsError
from infra.config import load_config
from infra.schedule import validate_schedule


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 3 ? * SUN *)",  # the default: Sundays 03:00 UTC
        "cron(0 10 * * ? *)",  # the guide's examples
        "cron(15 12 * * ? *)",
        "cron(0 18 ? * MON-FRI *)",
        "cron(0 8 1 * ? *)",
        "cron(0/15 * * * ? *)",
        "cron(0/10 * ? * MON-FRI *)",
        "cron(0/5 8-17 ? * MON-FRI *)",
        "cron(0 9 ? * 2#1 *)",  # first Monday of every month
        "cron(0 3 L * ? *)",
        "cron(0 3 ? * 6L *)",  # last Friday
        "cron(0 3 15W * ? *)",
        "cron(0 3 LW * ? *)",
        "cron(0 3 ? JAN,JUL SAT 2026-2030)",
        "cron(30 4 ? * SAT *)",
        "rate(1 day)",
        "rate(7 days)",
        "rate(5 minutes)",
    ],
)
def test_valid_expressions_pass(expression: str) -> None:
    assert validate_schedule(expression) == expression


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("cron(0 3 * * SUN)", "has 5 fields"),  # a Unix crontab line: 5 fields
        ("cron(0 3 * * SUN *)", "exactly one of Day-of-month"),  # both days given
        ("cron(0 3 ? * ? *)", "exactly one of Day-of-month"),
        ("cron(60 3 ? * SUN *)", "Minutes '60'"),
        ("cron(0 24 ? * SUN *)", "Hours '24'"),
        ("cron(0 3 32 * ? *)", "Day-of-month '32'"),
        ("cron(0 3 ? 13 SUN *)", "Month '13'"),
        ("cron(0 3 ? * 8 *)", "Day-of-week '8'"),
        ("cron(0 3 ? * SUN 1969)", "Year '1969'"),
        ("cron(0 3 ? * SUN-MON,FUN *)", "Day-of-week"),
        ("cron(0 17-9 ? * SUN *)", "runs backwards"),
        ("cron(? 3 ? * SUN *)", "'?' is allowed only"),
        ("cron(0 3 ? * 2#1,6#3 *)", "'#' is allowed only in Day-of-week, as its only"),
        ("cron(0 3 ? * 2#6 *)", "1 to 5"),
        ("cron(0 L ? * SUN *)", "'L' is allowed only"),
        ("cron(0/0 3 ? * SUN *)", "increment"),
        ("cron(0 3 ? * SUN/2 *)", "'/' is not a Day-of-week"),
        ("cron(0 3 ,1 * ? *)", "empty list item"),
        ("cron(0 3 ? * sun *)", "not a value"),
        ("rate(1 days)", "singular for 1"),
        ("rate(2 hour)", "singular for 1"),
        ("rate(0 minutes)", "positive"),
        ("rate(1 week)", "rate(<value>"),
        ("at(2026-01-01T00:00:00)", "neither cron"),
    ],
)
def test_invalid_expressions_say_what_is_wrong(expression: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_schedule(expression)
    assert says in str(caught.value)


def test_a_bad_schedule_is_refused_at_synth_naming_refresh_schedule() -> None:
    with pytest.raises(SettingsError) as caught:
        load_config({"clusters": [{"name": "a.example.com", "refresh_schedule": "cron(0 3 * * SUN)"}]})
    assert caught.value.name == "clusters[0].refresh_schedule"
    assert "refresh_schedule" in str(caught.value) and "cron has 6" in str(caught.value)
