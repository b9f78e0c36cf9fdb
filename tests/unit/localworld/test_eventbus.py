"""The local world's events carry the account and region its Lambdas run in, so the Lambdas act on them (an event
of another account or region is acknowledged, never acted on: ``lambdas.events.scope``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.settings import InterruptionSettings, RefresherSettings, ReplenisherSettings
from lambdas.events.dispatch import parse_event
from lambdas.events.event import EventKind
from lambdas.events.scope import Scope, out_of_scope
from localworld.cluster import ClusterInfo
from localworld.eventbus import DEFAULT_ACCOUNT, EventBus, launch_event, scheduled_event
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext

NOW = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def info() -> ClusterInfo:
    return ClusterInfo(
        name="demo.k8s.local",
        region="us-east-1",
        azs=("us-east-1a",),
        vpc_id="vpc-1",
        subnets={"us-east-1a": "subnet-1"},
        table_name="state",
        idempotency_table_name="idempotency",
        queue_url="https://sqs/q",
        queue_arn="arn:aws:sqs:us-east-1:123456789012:q",
        dlq_url="https://sqs/dlq",
        observer_queue_url="https://sqs/o",
        master_asgs={},
        worker_asgs={},
    )


@pytest.mark.parametrize("settings", [InterruptionSettings, ReplenisherSettings, RefresherSettings])
def test_the_local_lambdas_know_their_account_from_the_clusters_settings(settings: type) -> None:
    assert settings.from_env(info().env()).account_id == DEFAULT_ACCOUNT


def test_the_local_context_names_the_same_account() -> None:
    scope = Scope().with_context(LocalLambdaContext(1, INTERRUPTION_FUNCTION))
    assert scope == Scope(account=DEFAULT_ACCOUNT, region="us-east-1")


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (
            launch_event("nodes", successful=True, time=NOW, instance_id="i-0123456789abcdef0"),
            EventKind.LAUNCH_SUCCEEDED,
        ),
        (launch_event("nodes", successful=False, time=NOW), EventKind.LAUNCH_FAILED),
        (scheduled_event("tick", time=NOW), EventKind.TICK),
    ],
)
def test_the_buss_events_are_in_the_local_lambdas_scope(raw: dict, kind: EventKind) -> None:
    event = parse_event(raw, {kind}, NOW)
    home = Scope(account=InterruptionSettings.from_env(info().env()).account_id, region="us-east-1")
    assert out_of_scope(event, home) is None


class Session:
    region = "eu-west-1"

    def client(self, name: str) -> object:
        return object()


def test_the_bus_stamps_the_sessions_region() -> None:
    assert EventBus(Session(), watch_asgs=False).region == "eu-west-1"
