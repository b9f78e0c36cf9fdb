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
    - unschedulable with our annotation (any command id: a redelivered command, or an earlier command of this
      system) → already ours, nothing to change;
    - unschedulable without it → someone else's cordon: nothing to change, and never ours to undo.
    """
    if node.unschedulable:
        if node.cordoned_by is not None:
            return CordonDecision(patch=None, ours=True, by_other=False)
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
