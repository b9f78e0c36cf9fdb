"""Cordon and uncordon decisions (pure): which merge patch makes a node ours to drain, or gives it back.

A cordon this system made carries ``CORDON_ANNOTATION`` (the command id); a node someone else cordoned is never
uncordoned by us (DESIGN.md, safety invariant 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.kube.views import CORDON_ANNOTATION, NodeView


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


def decide_cordon(node: NodeView, command_id: str) -> CordonDecision:
    """Decide how to cordon ``node`` for command ``command_id`` (pure).

    - schedulable → set ``spec.unschedulable`` and our annotation in one patch conditioned on the node's
      resourceVersion;
    - unschedulable with our annotation naming this command (a redelivered command) → nothing to change;
    - unschedulable with our annotation naming an earlier command of this system (a rebalance cordon a Spot drain
      escalates) → still ours; the annotation is moved to this command (conditioned on the resourceVersion), so a
      give-back of the earlier command's cordon (``decide_release``) sees the cordon is no longer its own;
    - unschedulable without it → someone else's cordon: nothing to change, and never ours to undo.
    """
    if node.unschedulable:
        if node.cordoned_by == command_id:
            return CordonDecision(patch=None, ours=True, by_other=False)
        if node.cordoned_by is not None:
            restamp: dict[str, Any] = {
                "metadata": {"resourceVersion": node.resource_version, "annotations": {CORDON_ANNOTATION: command_id}}
            }
            return CordonDecision(patch=restamp, ours=True, by_other=False)
        return CordonDecision(patch=None, ours=False, by_other=True)
    patch = {
        "metadata": {"resourceVersion": node.resource_version, "annotations": {CORDON_ANNOTATION: command_id}},
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


def decide_uncordon(node: NodeView) -> UncordonDecision:
    """Decide how to uncordon ``node`` (pure): only a cordon carrying our annotation is undone (the annotation is
    removed with it); a node someone else cordoned stays cordoned (DESIGN.md, safety invariant 6)."""
    if node.cordoned_by is not None:
        patch = {
            "metadata": {"resourceVersion": node.resource_version, "annotations": {CORDON_ANNOTATION: None}},
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
    of ours holds (another id) is left; so is a node no longer cordoned (its stale annotation of ours is removed)."""
    if node.cordoned_by != command_id:
        holder = "someone else" if node.cordoned_by is None else f"command {node.cordoned_by}"
        if not node.unschedulable:
            return UncordonDecision(patch=None, by_other=False, message=f"node {node.name} is not cordoned")
        return UncordonDecision(
            patch=None, by_other=node.cordoned_by is None, message=f"node {node.name} is cordoned by {holder}: left"
        )
    return decide_uncordon(node)
