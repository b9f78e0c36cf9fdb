"""The drain's pod policy (pure): what to do with each pod of a node, following ``kubectl drain``'s filters.

``pod_disposition`` decides one pod (evict, delete, skip, wait or refuse, with the reason reported per pod);
``plan_drain`` applies it to every pod of the node; ``daemonset_owners`` names the DaemonSets whose existence
the engine must check first (a pod of a deleted DaemonSet is an orphan).

Shutdown time inside the deadline: ``grace_for`` caps the grace period an eviction gives a pod so its shutdown ends
``DRAIN_GRACE_MARGIN_SECONDS`` before the command's deadline; ``deletes_past_pdb`` and ``seconds_until_pdb_delete``
say whether and when a deadline-bound drain deletes a pod a PodDisruptionBudget still protects
(``DRAIN_PDB_DEADLINE_POLICY``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from agent.kube.views import MIRROR_POD_ANNOTATION, PodView
from core.model import DrainOptions
from core.settings import PdbDeadlinePolicy

# spec.terminationGracePeriodSeconds when the pod sets none (the API's default, core/v1 PodSpec)
DEFAULT_TERMINATION_GRACE_SECONDS = 30
# Command.reason prefixes of drains whose instance goes at the deadline whatever the drain did: a Spot
# interruption (lambdas.interruption.decide: "spot-interruption:<action>") and a termination lifecycle hook
# ("asg-lifecycle:<group>"; agent.hooks completes it with CONTINUE when the drain ends, timed out or not)
DEADLINE_BOUND_REASONS = ("spot-interruption:", "asg-lifecycle:")


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


class GraceSource(str, Enum):
    """Why a pod got the grace period it got (reported per pod in the drain result)."""

    POD = "pod"  # its own spec.terminationGracePeriodSeconds (30 when unset): it fits before the deadline
    OPTION = "option"  # the command's DrainOptions.grace_period_seconds (kubectl's --grace-period): it fits
    DEADLINE = "deadline"  # capped: the time left before the deadline minus the margin
    PDB_DEADLINE = "pdb-deadline"  # deleted past its PodDisruptionBudget near the deadline, with the time left


@dataclass(frozen=True)
class Grace:
    """The grace period of one eviction or deletion request.

    Attributes:
        seconds: what the pod gets (its ``metadata.deletionGracePeriodSeconds`` once the request is accepted).
        send: the ``deleteOptions.gracePeriodSeconds`` to send; None sends none (the pod's own applies).
        source: why (``GraceSource``).
    """

    seconds: int
    send: int | None
    source: GraceSource


def wanted_grace(pod: PodView, options: DrainOptions) -> tuple[int, GraceSource]:
    """The grace the pod would get without a deadline (pure): the command's override, else the pod's own
    ``spec.terminationGracePeriodSeconds``, else the API default (30 s)."""
    if options.grace_period_seconds is not None:
        return options.grace_period_seconds, GraceSource.OPTION
    own = pod.termination_grace_period_seconds
    return (DEFAULT_TERMINATION_GRACE_SECONDS if own is None else max(0, own)), GraceSource.POD


def grace_limit(remaining: float, margin: float) -> int:
    """The longest grace (whole seconds) that still ends ``margin`` seconds before the deadline (pure).

    ``remaining`` is the time left before the deadline in seconds. At least 1 while a second or more is left (a
    grace of 0 is an immediate deletion without SIGTERM; kubectl likewise turns 0 into 1 unless forced), 0 only
    when less than a second is left.
    """
    available = remaining - margin
    if available >= 1:
        return math.floor(available)
    return 1 if remaining >= 1 else 0


def grace_for(wanted: int, source: GraceSource, remaining: float, margin: float) -> Grace:
    """The grace of an eviction sent ``remaining`` seconds before the deadline (pure).

    The wanted grace (``wanted_grace``) when it fits (``wanted <= grace_limit(remaining, margin)``), sent only
    when it is the command's override; else capped to ``grace_limit`` and sent (source ``DEADLINE``). Never
    more than the wanted grace, never below 0.
    """
    limit = grace_limit(remaining, margin)
    if wanted <= limit:
        return Grace(wanted, wanted if source == GraceSource.OPTION else None, source)
    return Grace(limit, limit, GraceSource.DEADLINE)


def grace_past_pdb(wanted: int, remaining: float, margin: float) -> Grace:
    """The grace of the DELETE of a pod still protected by a PodDisruptionBudget at the deadline (pure): the
    wanted grace capped to ``grace_limit``, always sent, source ``PDB_DEADLINE``."""
    seconds = min(wanted, grace_limit(remaining, margin))
    return Grace(seconds, seconds, GraceSource.PDB_DEADLINE)


def instance_ends(reason: str) -> bool:
    """Whether a command with ``Command.reason`` is for an instance that is going away whatever the drain does (pure):
    a Spot interruption or a termination lifecycle action (``DEADLINE_BOUND_REASONS``). Its node's cordon is marked
    so that we never undo it (``agent.drain.cordon.ENDING_ANNOTATION``)."""
    return reason.startswith(DEADLINE_BOUND_REASONS)


def deletes_past_pdb(policy: PdbDeadlinePolicy, reason: str) -> bool:
    """Whether a drain with ``Command.reason`` deletes pods a PodDisruptionBudget still protects near its
    deadline (pure): only under ``PdbDeadlinePolicy.DELETE`` and only for deadline-bound drains
    (``DEADLINE_BOUND_REASONS``: the instance goes at the deadline anyway). Rebalance, refresh and replenish
    drains always honour budgets."""
    return policy == PdbDeadlinePolicy.DELETE and instance_ends(reason)


def seconds_until_pdb_delete(wanted: int, remaining: float, margin: float) -> float:
    """Seconds from now until a pod blocked by a PodDisruptionBudget is deleted (pure; <= 0: now): when its
    wanted grace is about to stop fitting before the deadline minus ``margin`` (deadline - margin - wanted - 1:
    one second early, so the whole-second ``grace_limit`` still equals the wanted grace then). It gets its full
    grace if the budget held it until then, and what is left when its grace never fitted."""
    return remaining - margin - wanted - 1


# Labels that make a node a control-plane node: kubeadm/kOps' node-role labels and kOps' legacy role label.
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def is_control_plane(labels: Mapping[str, str]) -> bool:
    """True for a control-plane node (``node-role.kubernetes.io/control-plane`` or ``.../master``, or kOps' legacy
    ``kubernetes.io/role=master``). Pure.

    >>> is_control_plane({"node-role.kubernetes.io/control-plane": ""}), is_control_plane({"kubernetes.io/role": "x"})
    (True, False)
    """
    return any(label in labels for label in CONTROL_PLANE_LABELS) or labels.get("kubernetes.io/role") == "master"
