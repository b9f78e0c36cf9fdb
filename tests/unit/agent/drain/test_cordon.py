"""Cordon and uncordon decisions (``agent.drain.cordon``): which cordon is ours, which patch to send."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.drain.cordon import decide_cordon, decide_uncordon
from agent.kube.views import CORDON_ANNOTATION, NodeView

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def node(unschedulable: bool = False, annotations: dict[str, str] | None = None) -> NodeView:
    return NodeView.from_api(
        {
            "metadata": {"name": "n1", "uid": "nu", "resourceVersion": "42", "annotations": annotations or {}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "unschedulable": unschedulable},
        }
    )


def test_cordon_of_a_schedulable_node_is_ours_and_conditional() -> None:
    decision = decide_cordon(node(), "cmd-1")
    assert decision.ours and not decision.by_other
    assert decision.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: "cmd-1"}},
        "spec": {"unschedulable": True},
    }


def test_node_cordoned_by_someone_else_is_not_ours() -> None:
    decision = decide_cordon(node(unschedulable=True), "cmd-1")
    assert decision.patch is None and not decision.ours and decision.by_other


@pytest.mark.parametrize("holder", ["cmd-1", "earlier-rebalance-cmd"])
def test_node_already_cordoned_by_us_stays_ours(holder: str) -> None:
    decision = decide_cordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: holder}), "cmd-1")
    assert decision.patch is None and decision.ours and not decision.by_other


def test_stale_annotation_on_an_uncordoned_node_is_rewritten() -> None:
    decision = decide_cordon(node(annotations={CORDON_ANNOTATION: "old"}), "cmd-2")
    assert decision.ours and decision.patch is not None
    assert decision.patch["metadata"]["annotations"] == {CORDON_ANNOTATION: "cmd-2"}


def test_uncordon_removes_our_cordon_and_annotation() -> None:
    decision = decide_uncordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: "cmd-1"}))
    assert not decision.by_other
    assert decision.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }


def test_uncordon_leaves_someone_elses_cordon() -> None:
    decision = decide_uncordon(node(unschedulable=True))
    assert decision.patch is None and decision.by_other
    assert "someone else" in decision.message


def test_uncordon_of_a_schedulable_node_does_nothing() -> None:
    decision = decide_uncordon(node())
    assert decision.patch is None and not decision.by_other
