"""Pure pieces of the in-memory Kubernetes cluster (``sim.kube``): API-shaped objects, merge patches, label
selectors, PodDisruptionBudget arithmetic and the Eviction API's error bodies.

Objects are the JSON dicts the apiserver sends (camelCase fields), so ``agent.kube.views.NodeView.from_api`` /
``PodView.from_api`` parse them exactly as they parse the real ones. Sources:

- JSON merge patch: RFC 7386 (``kubectl patch --type merge``; a ``null`` value deletes the key).
- PodDisruptionBudget status: "Specifying a Disruption Budget for your Application"
  (https://kubernetes.io/docs/tasks/run-application/configure-pdb/): ``minAvailable`` / ``maxUnavailable`` as an
  integer or a percentage of the expected pods (the owning controllers' scale, rounded up);
  ``disruptionsAllowed = currentHealthy - desiredHealthy`` (never below 0); a pod is healthy when Ready and not
  being deleted (pkg/controller/disruption).
- Eviction answers: "API-initiated Eviction" (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/)
  and pkg/registry/core/pod/storage/eviction.go: 429 with a ``DisruptionBudget`` cause naming the budget, 500 when
  more than one budget selects the pod.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
INSTANCE_GROUP_LABEL = "kops.k8s.io/instancegroup"


def timestamp(when: datetime) -> str:
    """An API ``Time`` (RFC 3339, whole seconds, ``Z``)."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(
    name: str, instance_id: str, az: str, labels: Mapping[str, str], ready: bool, created: datetime
) -> dict[str, Any]:
    """A core/v1 Node as the apiserver serves it (``spec.providerID`` = ``aws:///<az>/<instance-id>``)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"node-{instance_id}",
            "labels": dict(labels),
            "annotations": {},
            "creationTimestamp": timestamp(created),
        },
        "spec": {"providerID": f"aws:///{az}/{instance_id}"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod_object(
    namespace: str,
    name: str,
    uid: str,
    labels: Mapping[str, str],
    owner: tuple[str, str] | None,
    grace: int | None,
    created: datetime,
    phase: str = "Pending",
) -> dict[str, Any]:
    """A core/v1 Pod (``owner``: (kind, name) of its controller, None for a bare pod; ``grace``:
    ``spec.terminationGracePeriodSeconds``, None = the API default)."""
    meta: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "labels": dict(labels),
        "annotations": {},
        "creationTimestamp": timestamp(created),
    }
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    spec: dict[str, Any] = {"nodeName": "", "volumes": []}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": []}}


def set_ready(obj: dict[str, Any], ready: bool) -> None:
    """Set the ``Ready`` condition of a Node or Pod."""
    conditions = [c for c in obj["status"].get("conditions", []) if c.get("type") != "Ready"]
    conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    obj["status"]["conditions"] = conditions


def is_ready(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in obj["status"].get("conditions", []))


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch of ``target`` by ``patch`` (a new dict; ``None`` deletes a key, objects merge
    recursively, anything else replaces)."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            current = out.get(key)
            out[key] = merge_patch(current if isinstance(current, Mapping) else {}, value)
        else:
            out[key] = value
    return out


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A ``matchLabels`` selector against a pod's labels (an empty selector selects every pod of the namespace, as
    a policy/v1 PodDisruptionBudget's does)."""
    return all(labels.get(k) == v for k, v in selector.items())


def scaled(value: int | str, expected: int) -> int:
    """An IntOrString budget value against ``expected`` pods: an int as is, ``"N%"`` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * expected / 100)
    return int(value)


@dataclass(frozen=True)
class Budget:
    """A policy/v1 PodDisruptionBudget: ``selector`` (matchLabels) in ``namespace``, one of ``min_available`` /
    ``max_unavailable`` (int or ``"N%"``), ``always_allow_unhealthy`` (``unhealthyPodEvictionPolicy:
    AlwaysAllow``; default IfHealthyBudget)."""

    namespace: str
    name: str
    selector: Mapping[str, str]
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    always_allow_unhealthy: bool = False

    def desired_healthy(self, expected: int) -> int:
        """``status.desiredHealthy`` for ``expected`` pods (the controllers' scale)."""
        if self.min_available is not None:
            return scaled(self.min_available, expected)
        if self.max_unavailable is not None:
            return max(0, expected - scaled(self.max_unavailable, expected))
        return 0


def status_body(code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None) -> str:
    """A ``metav1.Status`` failure as the apiserver's error body (JSON text)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if causes:
        body["details"] = {"causes": causes}
    return json.dumps(body)


def pdb_refusal(budget: str, desired: int, healthy: int) -> str:
    """The 429 body of an eviction a PodDisruptionBudget refuses (eviction.go's wording)."""
    cause = f"The disruption budget {budget} needs {desired} healthy pods and has {healthy} currently"
    return status_body(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
        [{"reason": "DisruptionBudget", "message": cause}],
    )


MULTIPLE_PDBS = status_body(
    500,
    "InternalError",
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
)
