"""Typed, read-only views of the Kubernetes objects the agent works on: Nodes, Pods, Leases and watch events.

The conversion functions (``NodeView.from_api``, ``PodView.from_api``, ``LeaseView.from_api``) take the JSON the
apiserver sends (the Kubernetes API's own camelCase field names) and are pure; ``agent.kube.client.KubeAdapter``
reads with ``_preload_content=False`` and parses straight into these (the generated models are slow to build for
every pod of a node and every watch event). This module does not import ``kubernetes``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from core.model import parse_provider_id

# The annotation that marks a cordon as this system's own (value: the id of the command that cordoned).
CORDON_ANNOTATION = "node-manager.aws/cordoned-by"
# The node's instance is going away (a Spot interruption warning or a termination lifecycle action came for it): the
# value is the id of the command that learnt it. Set with the cordon, kept by later cordons, never removed by us while
# the node is cordoned (``agent.drain.cordon.decide_uncordon``).
ENDING_ANNOTATION = "node-manager.aws/instance-ending"
# Annotation the kubelet puts on the API-server copy of a static pod (a "mirror pod").
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def _condition_true(conditions: list[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def parse_status(body: str | None) -> dict[str, Any]:
    """The apiserver's ``Status`` object parsed from an error response's body; {} when it is not JSON."""
    if not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


@dataclass(frozen=True)
class NodeView:
    """What the drain needs of a Node (core/v1).

    Attributes:
        name: ``metadata.name``.
        uid: ``metadata.uid`` (for the Event's involvedObject).
        resource_version: ``metadata.resourceVersion``, used as the precondition of the cordon patch.
        provider_id: ``spec.providerID`` (``aws:///<az>/<instance-id>`` on AWS), "" when unset.
        unschedulable: ``spec.unschedulable`` (true = cordoned).
        annotations: ``metadata.annotations``.
        labels: ``metadata.labels`` (roles: ``node-role.kubernetes.io/*``, ``kops.k8s.io/instancegroup``).
        ready: the ``Ready`` condition in ``status.conditions`` is ``True``.
    """

    name: str
    uid: str = ""
    resource_version: str = ""
    provider_id: str = ""
    unschedulable: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    ready: bool = False

    @property
    def instance_id(self) -> str | None:
        """The EC2 instance id from ``spec.providerID``, None when the node is not an AWS instance."""
        parsed = parse_provider_id(self.provider_id)
        return None if parsed is None else parsed[1]

    @property
    def cordoned_by(self) -> str | None:
        """The command id in our cordon annotation, None when the annotation is absent."""
        return self.annotations.get(CORDON_ANNOTATION)

    @property
    def ending(self) -> bool:
        """The node is cordoned and marked ``ENDING_ANNOTATION``: its instance is going away (a Spot warning's two
        minutes, a termination lifecycle action), whatever its ``Ready`` says. An annotation left on a schedulable node
        (an operator's uncordon of an instance that came back) does not count."""
        return self.unschedulable and ENDING_ANNOTATION in self.annotations

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> NodeView:
        """Build from a Node as JSON (the API's camelCase field names)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        conditions = (obj.get("status") or {}).get("conditions") or []
        return cls(
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            resource_version=meta.get("resourceVersion", ""),
            provider_id=spec.get("providerID") or "",
            unschedulable=bool(spec.get("unschedulable", False)),
            annotations=dict(meta.get("annotations") or {}),
            labels=dict(meta.get("labels") or {}),
            ready=_condition_true(conditions, "Ready"),
        )


@dataclass(frozen=True)
class OwnerRef:
    """One ``metadata.ownerReferences`` entry."""

    kind: str
    name: str
    controller: bool = False


@dataclass(frozen=True)
class PodView:
    """What the drain needs of a Pod (core/v1).

    Attributes:
        namespace, name, uid: identity; ``uid`` tells a recreated pod (same name) from the one evicted.
        node_name: ``spec.nodeName``.
        phase: ``status.phase`` (Pending, Running, Succeeded, Failed, Unknown; "" when unset).
        ready: the ``Ready`` condition is ``True``.
        annotations, labels: from metadata.
        owners: ``metadata.ownerReferences``.
        emptydir_volumes: names of ``spec.volumes`` that are emptyDir (local data lost on eviction).
        deletion_timestamp: ``metadata.deletionTimestamp`` (set = already terminating).
        termination_grace_period_seconds: ``spec.terminationGracePeriodSeconds`` (None = the API default, 30).
    """

    namespace: str
    name: str
    uid: str = ""
    node_name: str = ""
    phase: str = ""
    ready: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    emptydir_volumes: tuple[str, ...] = ()
    deletion_timestamp: datetime | None = None
    termination_grace_period_seconds: int | None = None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def controller(self) -> OwnerRef | None:
        """The owner reference with ``controller: true`` (the ReplicaSet, DaemonSet, Job... that manages it)."""
        for owner in self.owners:
            if owner.controller:
                return owner
        return None

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> PodView:
        """Build from a Pod as JSON (the API's camelCase field names)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        ready = _condition_true(status.get("conditions") or [], "Ready")
        owners = tuple(
            OwnerRef(kind=o.get("kind", ""), name=o.get("name", ""), controller=bool(o.get("controller", False)))
            for o in meta.get("ownerReferences") or []
        )
        emptydirs = tuple(v.get("name", "") for v in spec.get("volumes") or [] if v.get("emptyDir") is not None)
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            node_name=spec.get("nodeName") or "",
            phase=status.get("phase") or "",
            ready=ready,
            annotations=dict(meta.get("annotations") or {}),
            labels=dict(meta.get("labels") or {}),
            owners=owners,
            emptydir_volumes=emptydirs,
            deletion_timestamp=_parse_time(meta.get("deletionTimestamp")),
            termination_grace_period_seconds=spec.get("terminationGracePeriodSeconds"),
        )


@dataclass(frozen=True)
class LeaseView:
    """A ``coordination.k8s.io/v1`` Lease as leader election reads it.

    Attributes:
        namespace, name: identity.
        resource_version: ``metadata.resourceVersion``, the precondition of the next update (optimistic
            concurrency: a replace carrying an older one is refused with 409 Conflict).
        holder: ``spec.holderIdentity`` ("" when released or never held).
        duration_seconds: ``spec.leaseDurationSeconds`` (None when unset).
        acquire_time, renew_time: ``spec.acquireTime``/``spec.renewTime`` (MicroTime; None when unset).
        transitions: ``spec.leaseTransitions`` (how many times the holder changed).
    """

    namespace: str
    name: str
    resource_version: str = ""
    holder: str = ""
    duration_seconds: int | None = None
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> LeaseView:
        """Build from a Lease as JSON (the API's camelCase field names). Pure."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            resource_version=meta.get("resourceVersion", ""),
            holder=spec.get("holderIdentity") or "",
            duration_seconds=spec.get("leaseDurationSeconds"),
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


def micro_time(value: datetime) -> str:
    """A ``MicroTime`` as the API writes it: RFC 3339 UTC with microseconds, e.g. ``2024-01-01T00:00:00.000000Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class PodEvent:
    """One watch event on pods.

    Attributes:
        type: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
        pod: the pod (None for BOOKMARK and ERROR).
        resource_version: where to resume the watch.
        code: for ERROR, the Status code (410 = the resourceVersion is too old: list again).
    """

    type: str
    pod: PodView | None = None
    resource_version: str | None = None
    code: int | None = None


@dataclass(frozen=True)
class NodeEvent:
    """One watch event on nodes; fields as in ``PodEvent``."""

    type: str
    node: NodeView | None = None
    resource_version: str | None = None
    code: int | None = None
