"""The agent's "Node Ready" (``lambdas.events.node_ready``): the fixture of record parses for the refresher only,
and every departure from the documented shape is malformed, naming the field."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.exceptions import MalformedEventError, UnsupportedEventError
from lambdas.events.dispatch import parse_event
from lambdas.events.event import EventKind
from lambdas.events.node_ready import MAX_NODES
from lambdas.interruption.handler import KINDS as INTERRUPTION_KINDS
from lambdas.refresher.handler import KINDS as REFRESHER_KINDS
from lambdas.replenisher.handler import KINDS as REPLENISHER_KINDS

EVENTS = Path(__file__).resolve().parents[3] / "events"
NOW = datetime(2024, 3, 5, 10, 32, tzinfo=UTC)


def fixture() -> dict[str, Any]:
    return json.loads((EVENTS / "agent-node-ready.json").read_text())


def test_the_fixture_of_record_carries_the_nodes_and_their_groups() -> None:
    raw = fixture()
    event = parse_event(raw, REFRESHER_KINDS, NOW)
    assert event.kind is EventKind.NODE_READY
    assert event.cluster == "demo.k8s.local"
    assert event.instance_ids == ("i-0a1b2c3d4e5f60718", "i-0c1d2e3f4a5b60720")
    assert event.asg_names == ("nodes-us-east-1a.demo.k8s.local", "")  # null: the agent could not tell
    assert (event.source, event.detail_type, event.event_id) == ("node-manager.agent", "Node Ready", raw["id"])
    assert event.describe() == "2 node(s) Ready"


@pytest.mark.parametrize("kinds", [INTERRUPTION_KINDS, REPLENISHER_KINDS])
def test_only_the_refresher_accepts_it(kinds: frozenset[EventKind]) -> None:
    with pytest.raises(UnsupportedEventError):
        parse_event(fixture(), kinds, NOW)


def _with(change: Any) -> dict[str, Any]:
    raw = copy.deepcopy(fixture())
    change(raw["detail"])
    return raw


@pytest.mark.parametrize(
    ("change", "mentions"),
    [
        (lambda d: d.pop("cluster"), "detail.cluster"),
        (lambda d: d.update(cluster=""), "detail.cluster"),
        (lambda d: d.pop("nodes"), "detail.nodes"),
        (lambda d: d.update(nodes=[]), "detail.nodes"),
        (lambda d: d.update(nodes="i-0a1b2c3d4e5f60718"), "detail.nodes"),
        (lambda d: d["nodes"][0].update(instance_id="i-XYZ"), "detail.nodes.0.instance_id"),
        (lambda d: d["nodes"][0].update(instance_id="../etc"), "detail.nodes.0.instance_id"),
        (lambda d: d["nodes"][1].pop("node_name"), "detail.nodes.1.node_name"),
        (lambda d: d["nodes"][0].update(asg_name=""), "detail.nodes.0.asg_name"),
        (lambda d: d["nodes"][0].update(asg_name=["a"]), "detail.nodes.0.asg_name"),
        (
            lambda d: d.update(nodes=[d["nodes"][0]] * (MAX_NODES + 1)),
            "detail.nodes",
        ),
    ],
)
def test_departures_from_the_shape_are_malformed(change: Any, mentions: str) -> None:
    with pytest.raises(MalformedEventError) as err:
        parse_event(_with(change), REFRESHER_KINDS, NOW)
    assert mentions in str(err.value)


def test_a_full_batch_parses() -> None:
    raw = _with(lambda d: d.update(nodes=[d["nodes"][0]] * MAX_NODES))
    assert len(parse_event(raw, REFRESHER_KINDS, NOW).instance_ids) == MAX_NODES
