"""Applying a cordon decision to a node (``DrainEngine.cordon_node``, ``uncordon_node``, ``release_node``): the patch
is conditioned on the node's resourceVersion, so a conflicting write (the node changed since it was read) re-reads
the node and decides again on what it is now."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from agent.drain.cordon import CordonDecision, UncordonDecision
from agent.drain.ports import DrainApi
from agent.kube.views import NodeView
from core.exceptions import KubernetesApiError, KubernetesNotFoundError, NodeNotFoundError

CORDON_CONFLICT_RETRIES = 8

_D = TypeVar("_D", CordonDecision, UncordonDecision)


def patch_until_applied(kube: DrainApi, node: NodeView, decide: Callable[[NodeView], _D]) -> tuple[NodeView, _D]:
    """Send ``decide(node)``'s patch; on a conflict re-read the node and decide again, up to
    ``CORDON_CONFLICT_RETRIES`` times.

    Returns:
        the node as it is now (as patched, or as read when the decision had no patch), and the decision applied.

    Raises:
        KubernetesApiError: still conflicting after ``CORDON_CONFLICT_RETRIES`` tries, or see ``KubeAdapter``.
        NodeNotFoundError: the node vanished meanwhile.
    """
    current: NodeView | None = node
    for _ in range(CORDON_CONFLICT_RETRIES):
        if current is None:
            raise NodeNotFoundError(node.instance_id or node.name)
        decision = decide(current)
        if decision.patch is None:
            return current, decision
        try:
            patched = kube.patch_node(current.name, decision.patch)
        except KubernetesNotFoundError as err:
            raise NodeNotFoundError(node.instance_id or node.name) from err
        if patched is not None:
            return patched, decision
        current = kube.get_node(node.name)
    raise KubernetesApiError(f"node {node.name} kept changing: {CORDON_CONFLICT_RETRIES} conflicting patches")
