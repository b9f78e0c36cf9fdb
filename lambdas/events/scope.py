"""Whether an event is the deployment's: its EventBridge envelope's ``account`` and ``region`` must be the ones the
Lambda runs in. Pure: no I/O.

Why: EventBridge delivers to a rule on the default bus the events of its own account and region, but a bus can also
receive events forwarded from other accounts or regions (cross-account/cross-region targets, a central bus). An
instance id from there means nothing here: such an event is acknowledged and counted, never acted on.

Where the deployment's scope comes from:

- ``region``: the region of the Lambda's AWS clients. In Lambda that is ``AWS_REGION``, set by the runtime (boto3
  reads it); the invocation context's function ARN names it too.
- ``account``: the invocation context's ``invoked_function_arn`` (``arn:aws:lambda:<region>:<account>:function:
  <name>``), which Lambda always passes; outside Lambda (tests, the local world, the CLI's ``--local``), the
  ``ACCOUNT_ID`` setting.

When either is unknown, no event from the bus is acted on (reason ``account_unknown`` / ``region_unknown``): the
Lambda cannot tell ours from foreign ones, and refusing is the side that cannot harm another account's nodes. This
never happens in Lambda (the context always names both); it makes a harness that forgot ``ACCOUNT_ID`` visibly do
nothing rather than silently skip the check.

Inputs without an envelope (a rule's constant input, a manual invocation: ``Event.source == ""``) are not checked:
who may invoke the function is IAM's business, and such inputs carry neither field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from lambdas.events.event import Event

# arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>]
_FUNCTION_ARN = re.compile(r"^arn:[a-z-]+:lambda:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):function:")


class ScopeReason(str, Enum):
    """Why an event is not the deployment's (the ``reason`` dimension of ``EventsOutOfScope``)."""

    FOREIGN_ACCOUNT = "foreign_account"  # the envelope's account is not the one the Lambda runs in
    FOREIGN_REGION = "foreign_region"  # the envelope's region is not the one the Lambda runs in
    ACCOUNT_UNKNOWN = "account_unknown"  # no context ARN and no ACCOUNT_ID: ours cannot be told from foreign
    REGION_UNKNOWN = "region_unknown"  # the Lambda's clients have no region


@dataclass(frozen=True)
class Scope:
    """The account and region the Lambda runs in; None when unknown.

    Attributes:
        account: the 12-digit AWS account id.
        region: the region code, e.g. ``us-east-1``.
    """

    account: str | None = None
    region: str | None = None

    def with_context(self, context: Any) -> Scope:
        """This scope with the account and region named by a Lambda context's ``invoked_function_arn`` (they win
        over a setting: they are where the function runs). Unchanged when ``context`` is None or names none.

        >>> class C: invoked_function_arn = "arn:aws:lambda:eu-west-1:111122223333:function:f"
        >>> Scope(account=None, region="eu-west-1").with_context(C())
        Scope(account='111122223333', region='eu-west-1')
        """
        match = _FUNCTION_ARN.match(str(getattr(context, "invoked_function_arn", "") or ""))
        if match is None:
            return self
        return replace(self, account=match["account"], region=match["region"])


@dataclass(frozen=True)
class OutOfScope:
    """An event that is not the deployment's: ``reason`` and a sentence for logs."""

    reason: ScopeReason
    message: str


def out_of_scope(event: Event, scope: Scope) -> OutOfScope | None:
    """Why ``event`` is not the deployment's, or None when it is (or has no envelope to judge).

    Args:
        event: the parsed event (``account`` and ``region`` copied from its envelope).
        scope: the deployment's.

    Returns:
        None for an input without an envelope or one of ``scope``'s account and region; otherwise the reason:
        ``account_unknown``/``region_unknown`` first (the check cannot be made), then ``foreign_account``, then
        ``foreign_region``.
    """
    if not event.source:
        return None
    if scope.account is None:
        return OutOfScope(
            ScopeReason.ACCOUNT_UNKNOWN, "the deployment's account is unknown (no Lambda context, no ACCOUNT_ID)"
        )
    if scope.region is None:
        return OutOfScope(ScopeReason.REGION_UNKNOWN, "the deployment's region is unknown")
    if event.account != scope.account:
        return OutOfScope(
            ScopeReason.FOREIGN_ACCOUNT, f"event of account {event.account!r}, deployment in {scope.account}"
        )
    if event.region != scope.region:
        return OutOfScope(ScopeReason.FOREIGN_REGION, f"event of region {event.region!r}, deployment in {scope.region}")
    return None
