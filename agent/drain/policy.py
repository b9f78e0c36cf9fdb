"""The drain's pod policy (pure): what to do with each pod of a node, following ``kubectl drain``'s filters.

``pod_disposition`` decides one pod (evict, delete, skip, wait or refuse, with the reason reported per pod);
``plan_drain`` applies it to every pod of the node; ``daemonset_owners`` names the DaemonSets whose existence
the engine must check first (a pod of a deleted DaemonSet is an orphan).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from agent.kube.views import MIRROR_POD_ANNOTATION, PodView
from core.model import DrainOptions


class PodAction(str, Enum):
    EVICT = "evict"  # through the Eviction API
    DELETE = "delete"  # a finished pod: plain DELETE (no budget counts it)
    SKIP = "skip"  # left on the node (DaemonSet, mirror pod)
    WAIT = "wait"  # already terminating: only wait until it is gone
    REFUSE = "refuse"  # kubectl drain would error on it; the drain fails before evicting anything


@dataclass(frozen=True)
class PodDisposition:
    """What to do with one pod, and why (the reason is reported per pod)."""

    action: PodAction
    reason: str = ""


def pod_disposition(
    pod: PodView, options: DrainOptions, missing_daemonsets: frozenset[tuple[str, str]] = frozenset()
) -> PodDisposition:
    """Decide what the drain does with ``pod`` (pure), following kubectl's drain filters
    (k8s.io/kubectl/pkg/drain/filters.go) in order:

    1. terminating (``metadata.deletionTimestamp`` set) → WAIT "terminating";
    2. mirror pod (annotation ``kubernetes.io/config.mirror``; a static pod's API copy) → SKIP "mirror";
    3. controlled by a DaemonSet → SKIP "daemonset" with ``ignore_daemonsets``, else REFUSE; when that
       DaemonSet no longer exists (``(namespace, name)`` in ``missing_daemonsets``) the pod is an orphan: EVICT
       with ``force``, else REFUSE;
    4. finished (phase Succeeded or Failed) → DELETE "finished";
    5. emptyDir volumes → EVICT "emptydir: local data lost" with ``delete_emptydir_data``, else REFUSE;
       no controller owner reference → EVICT "unmanaged: will not be recreated" with ``force``, else REFUSE
       (both apply, and are both reported, for a bare pod with an emptyDir);
    6. otherwise → EVICT (reason names the controller).
    """
    if pod.deletion_timestamp is not None:
        return PodDisposition(PodAction.WAIT, "terminating")
    if MIRROR_POD_ANNOTATION in pod.annotations:
        return PodDisposition(PodAction.SKIP, "mirror")
    controller = pod.controller
    if controller is not None and controller.kind == "DaemonSet":
        if (pod.namespace, controller.name) in missing_daemonsets:
            if options.force:
                return PodDisposition(PodAction.EVICT, "daemonset gone: orphan pod")
            return PodDisposition(PodAction.REFUSE, "daemonset gone: orphan pod (needs force)")
        if options.ignore_daemonsets:
            return PodDisposition(PodAction.SKIP, "daemonset")
        return PodDisposition(PodAction.REFUSE, "daemonset (needs ignore_daemonsets)")
    if pod.phase in ("Succeeded", "Failed"):
        return PodDisposition(PodAction.DELETE, "finished")
    reasons: list[str] = []
    refused: list[str] = []
    if pod.emptydir_volumes:
        if options.delete_emptydir_data:
            reasons.append("emptydir: local data lost")
        else:
            refused.append("emptydir: local data (needs delete_emptydir_data)")
    if controller is None:
        if options.force:
            reasons.append("unmanaged: will not be recreated")
        else:
            refused.append("unmanaged: not managed by a controller (needs force)")
    if refused:
        return PodDisposition(PodAction.REFUSE, "; ".join(refused))
    if not reasons and controller is not None:
        reasons.append(f"managed by {controller.kind} {controller.name}")
    return PodDisposition(PodAction.EVICT, "; ".join(reasons))


@dataclass(frozen=True)
class DrainPlan:
    """The drain's plan for a node's pods (``plan_drain``).

    Attributes:
        decisions: every pod with its disposition, in listing order.
    """

    decisions: tuple[tuple[PodView, PodDisposition], ...]

    def with_action(self, *actions: PodAction) -> list[tuple[PodView, PodDisposition]]:
        return [(pod, d) for pod, d in self.decisions if d.action in actions]

    @property
    def refused(self) -> list[tuple[PodView, PodDisposition]]:
        return self.with_action(PodAction.REFUSE)


def plan_drain(
    pods: Iterable[PodView], options: DrainOptions, missing_daemonsets: frozenset[tuple[str, str]] = frozenset()
) -> DrainPlan:
    """Apply ``pod_disposition`` to every pod (pure)."""
    return DrainPlan(tuple((pod, pod_disposition(pod, options, missing_daemonsets)) for pod in pods))


def daemonset_owners(pods: Iterable[PodView]) -> set[tuple[str, str]]:
    """(namespace, name) of every DaemonSet controlling one of ``pods`` (pure)."""
    return {
        (pod.namespace, pod.controller.name)
        for pod in pods
        if pod.controller is not None and pod.controller.kind == "DaemonSet" and pod.deletion_timestamp is None
    }
