"""Objects as the API returns them, for the simulator's planning tests (no API is called while planning)."""

from __future__ import annotations

import threading
from typing import Any

from localworld.simulator.base import Recent, Shared, View
from localworld.simulator.informer import Informer
from localworld.simulator.pods import PodWriter


def node(name: str, *, ready: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, *, node_name: str | None = None, owner: str | None = None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1", **meta}
    if owner:
        metadata["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


NO_API: Any = None  # planning calls no API; a call would fail on None


def shared() -> Shared:
    """Shared parts with no API behind them (informers never started)."""
    informers = {name: Informer(NO_API, name, lambda: None, threading.Event()) for name in ("nodes", "pods", "pdbs")}
    return Shared(rest=NO_API, informers=informers, pod_writer=PodWriter(NO_API, informers["pods"]), recent=Recent())


def view(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **rest: Any) -> View:
    by_key = {f"ns/{p['metadata']['name']}": p for p in pods}
    fields: dict[str, Any] = {"rsets": {}, "dsets": {}, "deploys": {}, "pdbs": {}, **rest}
    return View(nodes={n["metadata"]["name"]: n for n in nodes}, pods=by_key, **fields)
