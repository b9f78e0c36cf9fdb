"""Cordon and uncordon decisions (``agent.drain.cordon``): which cordon is ours, which patch to send."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.drain.cordon import ENDING_ANNOTATION, decide_cordon, decide_release, decide_uncordon
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


def test_node_already_cordoned_by_this_command_is_left_as_it_is() -> None:
    decision = decide_cordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: "cmd-1"}), "cmd-1")
    assert decision.patch is None and decision.ours and not decision.by_other


def test_a_cordon_of_an_earlier_command_stays_ours_and_moves_to_the_new_command() -> None:
    # a Spot drain escalating a rebalance cordon takes it over: the rebalance's give-back then leaves it
    decision = decide_cordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: "rebalance-1"}), "spot-1")
    assert decision.ours and not decision.by_other
    assert decision.patch == {"metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: "spot-1"}}}


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


def test_uncordon_leaves_the_cordon_of_a_drain_running_here() -> None:
    drained = node(unschedulable=True, annotations={CORDON_ANNOTATION: "refresh-r1-0"})
    decision = decide_uncordon(drained, frozenset({"refresh-r1-0"}))
    assert (
        decision.patch is None and not decision.by_other and "being drained by command refresh-r1-0" in decision.message
    )
    assert decide_uncordon(drained, frozenset({"spot-1"})).patch is not None  # another drain's: ours to undo
    assert decide_release(drained, "refresh-r1-0").patch is not None  # the drain's own give-back is not held back


def test_uncordon_of_a_schedulable_node_does_nothing() -> None:
    decision = decide_uncordon(node())
    assert decision.patch is None and not decision.by_other


def test_release_undoes_only_the_cordon_the_command_still_holds() -> None:
    decision = decide_release(node(unschedulable=True, annotations={CORDON_ANNOTATION: "rebalance-1"}), "rebalance-1")
    assert decision.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }


@pytest.mark.parametrize(
    ("unschedulable", "annotations", "by_other"),
    [
        (True, {}, True),  # an operator's cordon
        (True, {CORDON_ANNOTATION: "spot-1"}, False),  # a later command of ours took it over
        (False, {}, False),  # no longer cordoned
        (False, {CORDON_ANNOTATION: "spot-1"}, False),
    ],
)
def test_release_leaves_a_cordon_the_command_does_not_hold(
    unschedulable: bool, annotations: dict[str, str], by_other: bool
) -> None:
    decision = decide_release(node(unschedulable=unschedulable, annotations=annotations), "rebalance-1")
    assert decision.patch is None and decision.by_other is by_other


# ----------------------------------------------------------------------------------- an instance that is ending


def test_a_cordon_for_an_ending_instance_is_marked_with_the_command() -> None:
    decision = decide_cordon(node(), "spot-1", ending=True)
    assert decision.ours and decision.patch is not None
    assert decision.patch["metadata"]["annotations"] == {CORDON_ANNOTATION: "spot-1", ENDING_ANNOTATION: "spot-1"}


def test_a_spot_drain_taking_over_a_rebalance_cordon_marks_it_and_a_later_cordon_keeps_the_mark() -> None:
    escalated = decide_cordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: "rebalance-1"}), "spot-1", True)
    assert escalated.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: "spot-1", ENDING_ANNOTATION: "spot-1"}}
    }
    marked = {CORDON_ANNOTATION: "spot-1", ENDING_ANNOTATION: "spot-1"}
    later = decide_cordon(node(unschedulable=True, annotations=marked), "refresh-r1-0")
    assert later.patch == {"metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: "refresh-r1-0"}}}
    again = decide_cordon(node(unschedulable=True, annotations={CORDON_ANNOTATION: "spot-1"}), "spot-1", ending=True)
    assert again.patch is not None  # a redelivered Spot command whose first try cordoned without the mark
    assert again.patch["metadata"]["annotations"][ENDING_ANNOTATION] == "spot-1"


def test_a_stale_mark_on_a_schedulable_node_is_removed_by_a_cordon_for_another_reason() -> None:
    # an operator uncordoned a node whose instance came back (a hibernated Spot instance resumed)
    decision = decide_cordon(node(annotations={CORDON_ANNOTATION: "spot-1", ENDING_ANNOTATION: "spot-1"}), "cmd-2")
    assert decision.patch is not None
    assert decision.patch["metadata"]["annotations"] == {CORDON_ANNOTATION: "cmd-2", ENDING_ANNOTATION: None}


@pytest.mark.parametrize("holder", ["spot-1", "refresh-r1-0", "rebalance-1"])
def test_no_uncordon_or_release_of_ours_undoes_the_cordon_of_an_ending_instance(holder: str) -> None:
    ending = node(unschedulable=True, annotations={CORDON_ANNOTATION: holder, ENDING_ANNOTATION: "spot-1"})
    for decision in (decide_uncordon(ending), decide_release(ending, holder)):
        assert decision.patch is None and not decision.by_other
        assert "ending" in decision.message


def test_an_uncordon_after_an_operator_uncordoned_an_ending_node_removes_both_annotations() -> None:
    decision = decide_uncordon(node(annotations={CORDON_ANNOTATION: "spot-1", ENDING_ANNOTATION: "spot-1"}))
    assert decision.patch == {
        "metadata": {"resourceVersion": "42", "annotations": {CORDON_ANNOTATION: None, ENDING_ANNOTATION: None}},
        "spec": {},
    }
