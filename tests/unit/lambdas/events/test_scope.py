"""Where the deployment's scope comes from (the Lambda context's function ARN) and how an event is judged."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from lambdas.events.event import Event, EventKind
from lambdas.events.scope import Scope, ScopeReason, out_of_scope


@dataclass
class Context:
    invoked_function_arn: str


def bus_event(account: str = "123456789012", region: str = "us-east-1") -> Event:
    return Event(
        kind=EventKind.TICK,
        event_id="e-1",
        event_time=datetime(2024, 1, 1, tzinfo=UTC),
        source="aws.events",
        detail_type="Scheduled Event",
        account=account,
        region=region,
    )


def test_the_context_names_the_account_and_region_and_wins_over_the_setting() -> None:
    context = Context("arn:aws:lambda:eu-west-1:111122223333:function:node-manager-interruption:live")
    scope = Scope(account="123456789012", region="us-east-1").with_context(context)
    assert scope == Scope(account="111122223333", region="eu-west-1")


@pytest.mark.parametrize("context", [None, Context(""), Context("not-an-arn")])
def test_without_a_readable_context_the_scope_is_unchanged(context: object) -> None:
    assert Scope(account="123456789012", region="us-east-1").with_context(context) == Scope("123456789012", "us-east-1")


@pytest.mark.parametrize(
    ("event", "scope", "expected"),
    [
        (bus_event(), Scope("123456789012", "us-east-1"), None),
        (bus_event(account="999999999999"), Scope("123456789012", "us-east-1"), ScopeReason.FOREIGN_ACCOUNT),
        (bus_event(account=""), Scope("123456789012", "us-east-1"), ScopeReason.FOREIGN_ACCOUNT),
        (bus_event(region="us-west-2"), Scope("123456789012", "us-east-1"), ScopeReason.FOREIGN_REGION),
        (bus_event(), Scope(None, "us-east-1"), ScopeReason.ACCOUNT_UNKNOWN),
        (bus_event(), Scope("123456789012", None), ScopeReason.REGION_UNKNOWN),
    ],
)
def test_out_of_scope(event: Event, scope: Scope, expected: ScopeReason | None) -> None:
    got = out_of_scope(event, scope)
    assert (got.reason if got else None) is expected
