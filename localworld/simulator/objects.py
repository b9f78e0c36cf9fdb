"""Shared helpers of the simulator's controllers: API paths, object accessors and the scheduling predicates.

Objects are plain dicts as the API returns them (``localworld.rest.JSON``); nothing here talks to the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

# Collection paths (cluster-wide list + watch) and the apiVersion/kind of their items, per informer name.
PATHS = {
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "replicasets": "/apis/apps/v1/replicasets",
    "daemonsets": "/apis/apps/v1/daemonsets",
    "deployments": "/apis/apps/v1/deployments",
    "pdbs": "/apis/policy/v1beta1/poddisruptionbudgets",
}
KINDS = {
    "nodes": ("v1", "Node"),
    "pods": ("v1", "Pod"),
    "replicasets": ("apps/v1", "ReplicaSet"),
    "daemonsets": ("apps/v1", "DaemonSet"),
    "deployments": ("apps/v1", "Deployment"),
    "pdbs": ("policy/v1beta1", "PodDisruptionBudget"),
}


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp as the API writes it (``2024-01-01T00:00:00Z``)."""
    if not value:
        return None
    return datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def resource_version(obj: Mapping[str, Any]) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_live(pod: Mapping[str, Any]) -> bool:
    """Counted by a ReplicaSet: not terminating and not finished (ReplicaSet controller's FilterActivePods)."""
    return not is_terminating(pod) and not is_finished(pod)


def has_condition(obj: Mapping[str, Any], kind: str, status: str = "True") -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return bool(cond.get("status") == status)
    return False


def node_ready(node: Mapping[str, Any]) -> bool:
    return has_condition(node, "Ready")


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return has_condition(pod, "Ready")


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str], empty_matches: bool) -> bool:
    """A ``LabelSelector`` (matchLabels + matchExpressions) against ``labels``.

    ``empty_matches``: what an empty or absent selector selects (policy/v1beta1 PDB: nothing; most others: all).
    """
    if not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions")):
        return empty_matches
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether one of ``tolerations`` tolerates ``taint`` (core/v1 Toleration semantics)."""
    for tol in tolerations:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        op = tol.get("operator", "Equal")
        if not tol.get("key"):
            if op == "Exists":
                return True
            continue
        if tol["key"] != taint.get("key"):
            continue
        if op == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def fits(pod_spec: Mapping[str, Any], node: Mapping[str, Any], ignore_unschedulable: bool = False) -> bool:
    """Ready, schedulable (unless ignored), ``nodeSelector`` matched, NoSchedule/NoExecute taints tolerated."""
    if not node_ready(node):
        return False
    spec = node.get("spec") or {}
    if spec.get("unschedulable") and not ignore_unschedulable:
        return False
    labels = node["metadata"].get("labels") or {}
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    tolerations = pod_spec.get("tolerations") or []
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return False
    return True
