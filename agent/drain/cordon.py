"""Cordon and uncordon decisions (pure): which merge patch makes a node ours to drain, or gives it back.

A cordon this system made carries ``CORDON_ANNOTATION`` (the command id); a node someone else cordoned is never
uncordoned by us (DESIGN.md, safety invariant 6). A cordon made for an instance that is ending (a Spot warning, a
termination lifecycle hook: ``agent.drain.policy.instance_ends``) also carries ``ENDING_ANNOTATION`` (the command id):
no uncordon of ours, whoever asks for it (a failed drain's ``uncordon_on_failure``, a refresh or replenish give-back,
a rebalance's quiet period), undoes the cordon of such a node.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from agent.kube.views import CORDON_ANNOTATION, ENDING_ANNOTATION, NodeView

__all__ = [  # ENDING_ANNOTATION lives beside CORDON_ANNOTATION (``NodeView.ending`` reads it); named here as before
    "ENDING_ANNOTATION",
    "CordonDecision",
    "UncordonDecision",
    "decide_cordon",
    "decide_release",
    "decide_uncordon",
]


@dataclass(frozen=True)
class CordonDecision:
    """What cordoning a node takes (``decide_cordon``).

    Attributes:
        patch: the merge patch to send (None: nothing to change).
        ours: after the patch the cordon is this system's (our annotation is on the node).
        by_other: the node was already cordoned by someone else (no annotation of ours): left so.
    """

    patch: dict[str, Any] | None
    ours: bool
    by_other: bool


def decide_cordon(node: NodeView, command_id: str, ending: bool = False) -> CordonDecision:
    """Decide how to cordon ``node`` for command ``command_id`` (pure); ``ending``: the command's instance is going
    away (``agent.drain.policy.instance_ends``), so the cordon is marked ``ENDING_ANNOTATION`` and never undone by us.

    - schedulable → set ``spec.unschedulable`` and our annotation in one patch conditioned on the node's
      resourceVersion (a stale ``ENDING_ANNOTATION``, left by an operator's uncordon of an instance that came back,
      is removed unless this command is ``ending`` too);
    - unschedulable with our annotation naming this command (a redelivered command) → nothing to change (but the
      ``ENDING_ANNOTATION`` an ``ending`` command's first try may not have written);
    - unschedulable with our annotation naming an earlier command of this system (a rebalance cordon a Spot drain
      escalates) → still ours; the annotation is moved to this command (conditioned on the resourceVersion), so a
      give-back of the earlier command's cordon (``decide_release``) sees the cordon is no longer its own; an
      ``ENDING_ANNOTATION`` already there stays;
    - unschedulable without it → someone else's cordon: nothing to change, and never ours to undo.
    """
    marked = node.annotations.get(ENDING_ANNOTATION) is not None
    if node.unschedulable:
        if node.cordoned_by is None:
            return CordonDecision(patch=None, ours=False, by_other=True)
        if node.cordoned_by == command_id and (marked or not ending):
            return CordonDecision(patch=None, ours=True, by_other=False)
        annotations: dict[str, str | None] = {CORDON_ANNOTATION: command_id}
        if ending and not marked:
            annotations[ENDING_ANNOTATION] = command_id
        restamp: dict[str, Any] = {"metadata": {"resourceVersion": node.resource_version, "annotations": annotations}}
        return CordonDecision(patch=restamp, ours=True, by_other=False)
    annotations = {CORDON_ANNOTATION: command_id}
    if ending:
        annotations[ENDING_ANNOTATION] = command_id
    elif marked:
        annotations[ENDING_ANNOTATION] = None
    patch = {
        "metadata": {"resourceVersion": node.resource_version, "annotations": annotations},
        "spec": {"unschedulable": True},
    }
    return CordonDecision(patch=patch, ours=True, by_other=False)


@dataclass(frozen=True)
class UncordonDecision:
    """What uncordoning a node takes (``decide_uncordon``).

    Attributes:
        patch: the merge patch to send (None: nothing to change).
        by_other: the node is cordoned by someone else: left cordoned.
        message: what happens, for the result.
    """

    patch: dict[str, Any] | None
    by_other: bool
    message: str


def decide_uncordon(node: NodeView, draining: Container[str] = ()) -> UncordonDecision:
    """Decide how to uncordon ``node`` (pure): only a cordon carrying our annotation is undone (the annotation is
    removed with it); a node someone else cordoned stays cordoned (DESIGN.md, safety invariant 6); so does a node
    whose instance is ending (``ENDING_ANNOTATION``: a Spot warning or a termination lifecycle action came for it),
    whoever asks, and a node whose cordon annotation names one of ``draining`` (the drains running in this engine:
    ``agent.drain.running``; that drain's end decides whether its cordon is given back)."""
    ending = node.annotations.get(ENDING_ANNOTATION)
    if node.unschedulable and ending is not None:
        return UncordonDecision(
            patch=None, by_other=False, message=f"node {node.name}'s instance is ending ({ending}): left cordoned"
        )
    if node.unschedulable and node.cordoned_by is not None and node.cordoned_by in draining:
        return UncordonDecision(
            patch=None,
            by_other=False,
            message=f"node {node.name} is being drained by command {node.cordoned_by}: left cordoned",
        )
    if node.cordoned_by is not None:
        patch = {
            "metadata": {
                "resourceVersion": node.resource_version,
                "annotations": {CORDON_ANNOTATION: None, **({ENDING_ANNOTATION: None} if ending is not None else {})},
            },
            "spec": {"unschedulable": None} if node.unschedulable else {},
        }
        return UncordonDecision(patch=patch, by_other=False, message=f"uncordoned node {node.name}")
    if node.unschedulable:
        return UncordonDecision(
            patch=None, by_other=True, message=f"node {node.name} was cordoned by someone else: left cordoned"
        )
    return UncordonDecision(patch=None, by_other=False, message=f"node {node.name} is not cordoned")


def decide_release(node: NodeView, command_id: str) -> UncordonDecision:
    """Decide how to give back the cordon command ``command_id`` made (pure): only while the node is cordoned and
    our annotation still names that command. A cordon someone else made (no annotation of ours) or a later command
    of ours holds (another id) is left; so is a node whose instance is ending (``decide_uncordon``) and a node no
    longer cordoned (a stale annotation of this command is removed)."""
    if node.cordoned_by != command_id:
        holder = "someone else" if node.cordoned_by is None else f"command {node.cordoned_by}"
        if not node.unschedulable:
            return UncordonDecision(patch=None, by_other=False, message=f"node {node.name} is not cordoned")
        return UncordonDecision(
            patch=None, by_other=node.cordoned_by is None, message=f"node {node.name} is cordoned by {holder}: left"
        )
    return decide_uncordon(node)
