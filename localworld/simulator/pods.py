"""Pod writes shared by the simulator's controllers (kubelet, ReplicaSet, DaemonSet, garbage collector), and the pods
a controller makes from its template.

Every write also goes into the pods informer's cache at once, so the next pass sees it before the watch event comes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from localworld.rest import JSON, KubeRest, q
from localworld.simulator.informer import Informer
from localworld.simulator.objects import controller_of, node_ready, now_rfc3339


def owned_pods(pods: Mapping[str, JSON]) -> dict[str, list[JSON]]:
    """Pods grouped by the uid of their controller owner (pods without one are left out)."""
    owned: dict[str, list[JSON]] = {}
    for pod in pods.values():
        ref = controller_of(pod)
        if ref:
            owned.setdefault(ref["uid"], []).append(pod)
    return owned


def new_pod(owner: Mapping[str, Any], owner_kind: str, node: str | None) -> JSON:
    """A Pod body from ``owner``'s template (``generateName: <owner>-``), controlled by it, bound to ``node`` if given.

    ``owner_kind``: ``"ReplicaSet"`` or ``"DaemonSet"`` (apps/v1).
    """
    meta = owner["metadata"]
    template = (owner.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    spec = dict(template.get("spec") or {})
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner_kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def pod_path(pod: Mapping[str, Any]) -> str:
    """``/api/v1/namespaces/<ns>/pods/<name>`` of ``pod``."""
    meta = pod["metadata"]
    return f"/api/v1/namespaces/{q(meta['namespace'])}/pods/{q(meta['name'])}"


class PodWriter:
    """Pod writes through ``rest``, mirrored into the pods ``informer``'s cache. Safe from several threads.

    Raises (every method): ``ApiException`` from the API, except where a method says it absorbs one.
    """

    def __init__(self, rest: KubeRest, informer: Informer) -> None:
        self.rest = rest
        self.informer = informer
        self._lock = threading.Lock()
        self._ip_counter = 0

    def force_delete(self, pod: JSON) -> None:
        """Delete with grace 0 and a uid precondition (404 and 409: already gone or replaced, absorbed)."""
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": pod["metadata"]["uid"]},
        }
        try:
            self.rest.request("DELETE", pod_path(pod), body=body)
        except ApiException as err:
            if err.status not in (404, 409):
                raise
        self.informer.remove(pod)

    def delete(self, pod: JSON) -> None:
        """A graceful delete (the pod's own grace period); the cache keeps it terminating, or drops it if gone."""
        result = self.rest.request("DELETE", pod_path(pod))
        if result.get("kind") == "Pod" and result["metadata"].get("deletionTimestamp"):
            self.informer.apply(result)
        else:
            self.informer.remove(pod)

    def _next_ip(self) -> str:
        with self._lock:
            self._ip_counter += 1
            n = self._ip_counter
        return f"100.96.{(n >> 8) & 255}.{n & 255}"

    def start(self, pod: JSON, node: Mapping[str, Any]) -> None:
        """Write the status a kubelet writes once the pod's containers run: phase Running, Ready, a pod IP
        (``100.96.x.y``), the node's InternalIP as hostIP, one running container status per container."""
        ts = now_rfc3339()
        host_ip = next(
            (a["address"] for a in (node.get("status") or {}).get("addresses") or [] if a["type"] == "InternalIP"),
            "10.0.0.1",
        )
        containers = (pod.get("spec") or {}).get("containers") or []
        status = {
            "status": {
                "phase": "Running",
                "hostIP": host_ip,
                "podIP": self._next_ip(),
                "startTime": ts,
                "conditions": [
                    {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                    for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": ts}},
                    }
                    for c in containers
                ],
            }
        }
        updated = self.rest.patch(f"{pod_path(pod)}/status", status)
        self.informer.apply(updated)

    def create(self, body: JSON, node: Mapping[str, Any] | None) -> None:
        """Create the pod; when it is bound to a Ready ``node``, start it at once (as its kubelet soon would)."""
        ns = body["metadata"]["namespace"]
        created = self.rest.post(f"/api/v1/namespaces/{q(ns)}/pods", body)
        self.informer.apply(created)
        if node is not None and node_ready(node):
            self.start(created, node)
