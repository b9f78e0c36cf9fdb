"""An in-memory Kubernetes API for the drain engine (review helper): nodes with merge patches conditioned on the
resourceVersion, pods on nodes, a pod watch fed from every change, and evictions answered by a per-pod policy."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from agent.kube.eviction import EvictionResponse, EvictionStatus
from agent.kube.views import NodeView, OwnerRef, PodEvent, PodView

INSTANCE = "i-0123456789abcdef0"


class Watch:
    def __init__(self, q: queue.Queue[PodEvent], unsubscribe: Callable[[], None]) -> None:
        self.q = q
        self.closed = threading.Event()
        self._unsubscribe = unsubscribe

    def __iter__(self) -> Iterator[PodEvent]:
        while not self.closed.is_set():
            try:
                yield self.q.get(timeout=0.05)
            except queue.Empty:
                continue

    def close(self) -> None:
        self.closed.set()
        self._unsubscribe()


def pod(
    name: str, uid: str | None = None, node: str = "n1", grace: int | None = 5, kind: str = "ReplicaSet"
) -> PodView:
    return PodView(
        namespace="web",
        name=name,
        uid=uid or f"{name}-uid",
        node_name=node,
        phase="Running",
        ready=True,
        owners=(OwnerRef(kind, "owner", True),),
        termination_grace_period_seconds=grace,
    )


EVICT = EvictionResponse(EvictionStatus.EVICTED, 201)
PDB = EvictionResponse(
    EvictionStatus.BLOCKED, 429, "Cannot evict pod as it would violate the pod's disruption budget.", "pdb"
)
FORBIDDEN = EvictionResponse(EvictionStatus.ERROR, 403, "forbidden", retryable=False)


class FakeCluster:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rv = 1
        self.nodes: dict[str, NodeView] = {}
        self.pods: dict[str, PodView] = {}
        self.watchers: list[queue.Queue[PodEvent]] = []
        # per pod key: a function (grace) -> EvictionResponse; default: evicted
        self.policy: dict[str, Callable[[int | None], EvictionResponse]] = {}
        self.evictions: list[tuple[str, int | None]] = []
        self.deletes: list[tuple[str, int | None]] = []
        self.on_gone: Callable[[PodView], None] | None = None
        self.add_node("n1")

    # -- setup --------------------------------------------------------------------------------------------------
    def _next(self) -> str:
        self.rv += 1
        return str(self.rv)

    def add_node(
        self,
        name: str,
        instance: str = INSTANCE,
        unschedulable: bool = False,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        with self.lock:
            self.nodes[name] = NodeView(
                name=name,
                uid=f"{name}-uid",
                resource_version=self._next(),
                provider_id=f"aws:///us-east-1a/{instance}",
                unschedulable=unschedulable,
                annotations=dict(annotations or {}),
                labels=dict(labels or {}),
                ready=True,
            )

    def set_node(self, name: str, **changes: Any) -> None:
        """An outside writer (an operator's kubectl) changes the node."""
        with self.lock:
            node = self.nodes[name]
            self.nodes[name] = dataclasses.replace(node, resource_version=self._next(), **changes)

    def add_pod(self, p: PodView) -> None:
        with self.lock:
            self.pods[p.key] = p
            self._emit(PodEvent("ADDED", p, resource_version=self._next()))

    def remove_pod(self, key: str) -> None:
        with self.lock:
            p = self.pods.pop(key, None)
            if p is None:
                return
            self._emit(PodEvent("DELETED", p, resource_version=self._next()))
        if self.on_gone is not None:
            self.on_gone(p)

    def _emit(self, event: PodEvent) -> None:
        for q in list(self.watchers):
            q.put(event)

    # -- DrainApi -----------------------------------------------------------------------------------------------
    def get_node(self, name: str) -> NodeView | None:
        with self.lock:
            return self.nodes.get(name)

    def node_for_instance(self, instance_id: str, scan: bool = True) -> NodeView | None:
        with self.lock:
            for node in self.nodes.values():
                if node.instance_id == instance_id:
                    return node
        return None

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> NodeView | None:
        with self.lock:
            node = self.nodes.get(name)
            if node is None:
                from core.exceptions import KubernetesNotFoundError

                raise KubernetesNotFoundError(f"node {name}")
            meta = patch.get("metadata") or {}
            want = meta.get("resourceVersion")
            if want is not None and want != node.resource_version:
                return None
            annotations = dict(node.annotations)
            for k, v in (meta.get("annotations") or {}).items():
                if v is None:
                    annotations.pop(k, None)
                else:
                    annotations[k] = v
            unschedulable = node.unschedulable
            spec = patch.get("spec") or {}
            if "unschedulable" in spec:
                unschedulable = bool(spec["unschedulable"])
            self.nodes[name] = dataclasses.replace(
                node, annotations=annotations, unschedulable=unschedulable, resource_version=self._next()
            )
            return self.nodes[name]

    def list_pods_on_node(self, node_name: str) -> tuple[list[PodView], str]:
        with self.lock:
            return [p for p in self.pods.values() if p.node_name == node_name], str(self.rv)

    def watch_pods_on_node(self, node_name: str, resource_version: str, timeout_seconds: int) -> Watch:
        q: queue.Queue[PodEvent] = queue.Queue()
        with self.lock:
            self.watchers.append(q)

        def unsubscribe() -> None:
            with self.lock:
                if q in self.watchers:
                    self.watchers.remove(q)

        return Watch(q, unsubscribe)

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        return True

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        key = f"{namespace}/{name}"
        with self.lock:
            self.evictions.append((key, grace_period_seconds))
            current = self.pods.get(key)
            if current is None or (uid and current.uid != uid):
                return EvictionResponse(EvictionStatus.GONE, 404)
            answer = self.policy.get(key, lambda g: EVICT)(grace_period_seconds)
        if answer.status is EvictionStatus.EVICTED:
            self.remove_pod(key)
        return answer

    def delete_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> bool:
        key = f"{namespace}/{name}"
        with self.lock:
            self.deletes.append((key, grace_period_seconds))
            current = self.pods.get(key)
            if current is None or (uid and current.uid != uid):
                return False
        self.remove_pod(key)
        return True
