"""Workloads for the local world: what a drain meets in a real cluster.

Without a Deployment controller the world writes each Deployment *and* its ReplicaSet (ownerReferences Deployment ->
ReplicaSet -> Pod, as the Deployment controller would); the simulator's ReplicaSet controller makes the pods.
PodDisruptionBudgets are ``policy/v1beta1`` (the only version kube-apiserver v1.20 serves), written as raw JSON since
the Python client no longer ships that API.

All functions take an admin ``kubernetes.client.ApiClient``; names and namespaces are returned so tests look them up.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from localworld.rest import JSON, KubeRest, q
from localworld.simulator.objects import is_live, node_ready, pod_ready
from localworld.simulator.replicaset import PREFER_NODE_ANNOTATION

PAUSE_IMAGE = "registry.k8s.io/pause:3.2"
PDB_API = "/apis/policy/v1beta1"


def _rest(api: ApiClient | KubeRest) -> KubeRest:
    return api if isinstance(api, KubeRest) else KubeRest(api)


def ensure_namespace(api: ApiClient | KubeRest, namespace: str) -> None:
    """Create ``namespace`` unless it exists (namespaces are reused, never deleted, in the local world)."""
    rest = _rest(api)
    try:
        rest.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    except ApiException as err:
        if err.status != 409:
            raise


def pod_template(
    app: str,
    *,
    grace: int = 0,
    labels: dict[str, str] | None = None,
    empty_dir: bool = False,
    tolerate_all: bool = False,
    node_selector: dict[str, str] | None = None,
) -> JSON:
    """A pod template running one pause container, labelled ``app=<app>``, with ``terminationGracePeriodSeconds``."""
    spec: JSON = {
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "app", "image": PAUSE_IMAGE}],
    }
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    if tolerate_all:
        spec["tolerations"] = [{"operator": "Exists"}]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"metadata": {"labels": {"app": app, **(labels or {})}}, "spec": spec}


def create_replicaset(
    api: ApiClient | KubeRest,
    namespace: str,
    name: str,
    replicas: int,
    template: JSON,
    *,
    owner: JSON | None = None,
    annotations: dict[str, str] | None = None,
) -> JSON:
    """Create an apps/v1 ReplicaSet selecting ``template``'s labels; ``owner`` (a Deployment) becomes its controller."""
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(template["metadata"]["labels"])}
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(template["metadata"]["labels"])},
            "template": template,
        },
    }
    return _rest(api).post(f"/apis/apps/v1/namespaces/{q(namespace)}/replicasets", body)


def create_deployment(
    api: ApiClient | KubeRest, namespace: str, name: str, replicas: int, template: JSON
) -> tuple[JSON, JSON]:
    """Create a Deployment and the ReplicaSet its controller would make (``<name>-<pod-template-hash>``).

    Returns:
        ``(deployment, replicaset)`` as the API returned them.
    """
    rest = _rest(api)
    template_hash = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": template["metadata"]["labels"]["app"]}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(template["metadata"]["labels"])},
            "template": template,
        },
    }
    deployment = rest.post(f"/apis/apps/v1/namespaces/{q(namespace)}/deployments", body)
    rs_template = json.loads(json.dumps(template))
    rs_template["metadata"]["labels"]["pod-template-hash"] = template_hash
    rs = create_replicaset(rest, namespace, f"{name}-{template_hash}", replicas, rs_template, owner=deployment)
    return deployment, rs


def create_daemonset(api: ApiClient | KubeRest, namespace: str, name: str, template: JSON) -> JSON:
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(template["metadata"]["labels"])}, "template": template},
    }
    return _rest(api).post(f"/apis/apps/v1/namespaces/{q(namespace)}/daemonsets", body)


def create_bare_pod(
    api: ApiClient | KubeRest, namespace: str, name: str, *, grace: int = 0, node_name: str | None = None
) -> JSON:
    """A pod no controller manages (``kubectl drain`` needs ``--force`` for it); unbound unless ``node_name``."""
    template = pod_template(name, grace=grace)
    spec = dict(template["spec"])
    if node_name:
        spec["nodeName"] = node_name
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": template["metadata"]["labels"]},
        "spec": spec,
    }
    return _rest(api).post(f"/api/v1/namespaces/{q(namespace)}/pods", body)


def create_pdb(
    api: ApiClient | KubeRest,
    namespace: str,
    name: str,
    selector: dict[str, str],
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> JSON:
    """Create a policy/v1beta1 PodDisruptionBudget (exactly one of ``min_available`` / ``max_unavailable``)."""
    if (min_available is None) == (max_unavailable is None):
        raise ValueError("give exactly one of min_available and max_unavailable")
    spec: JSON = {"selector": {"matchLabels": dict(selector)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    else:
        spec["maxUnavailable"] = max_unavailable
    body = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return _rest(api).post(f"{PDB_API}/namespaces/{q(namespace)}/poddisruptionbudgets", body)


def get_pdb(api: ApiClient | KubeRest, namespace: str, name: str) -> JSON:
    """A policy/v1beta1 PodDisruptionBudget as JSON (``status.disruptionsAllowed``, ``status.observedGeneration``)."""
    return _rest(api).get(f"{PDB_API}/namespaces/{q(namespace)}/poddisruptionbudgets/{q(name)}")


def list_pdbs(api: ApiClient | KubeRest, namespace: str | None = None) -> list[JSON]:
    path = (
        f"{PDB_API}/namespaces/{q(namespace)}/poddisruptionbudgets" if namespace else f"{PDB_API}/poddisruptionbudgets"
    )
    return list(_rest(api).get(path).get("items", []))


def block_with_pdb(api: ApiClient | KubeRest, namespace: str, app: str, name: str | None = None) -> str:
    """A PDB with ``maxUnavailable: 0`` over ``app=<app>``: it allows no disruption, so evictions answer 429.

    Returns the PDB's name (default ``<app>-blocker``).
    """
    name = name or f"{app}-blocker"
    create_pdb(api, namespace, name, {"app": app}, max_unavailable=0)
    return name


@dataclass
class Workloads:
    """What ``deploy_workloads`` created (namespace, object names, expected pod counts)."""

    namespace: str
    deployments: dict[str, int] = field(default_factory=dict)  # name -> replicas
    replicasets: dict[str, str] = field(default_factory=dict)  # app -> ReplicaSet name
    pdbs: dict[str, str] = field(default_factory=dict)  # app -> PDB name
    daemonset: str = ""
    bare_pod: str = ""
    graces: dict[str, int] = field(default_factory=dict)  # app -> terminationGracePeriodSeconds

    @property
    def controlled_pods(self) -> int:
        """Pods of Deployments and standalone ReplicaSets (DaemonSet pods excluded)."""
        return sum(self.deployments.values())


def deploy_workloads(
    api: ApiClient | KubeRest,
    namespace: str = "workloads",
    *,
    web_replicas: int = 6,
    api_replicas: int = 3,
    scratch_replicas: int = 2,
    slow_grace: int = 2,
    daemonset: bool = True,
    bare_pod: bool = True,
) -> Workloads:
    """Create a realistic mix in ``namespace``:

    - Deployment ``web`` (``web_replicas``, grace 0) with PDB ``web`` minAvailable 4;
    - Deployment ``api`` (``api_replicas``, grace ``slow_grace`` s) with PDB ``api`` maxUnavailable 1;
    - ReplicaSet ``scratch`` (``scratch_replicas``, grace 0) whose pods use an emptyDir volume
      (``kubectl drain`` needs ``--delete-emptydir-data``);
    - DaemonSet ``node-agent`` (grace 0, tolerates every taint, so it runs on masters too);
    - bare pod ``standalone`` (no owner; ``kubectl drain`` needs ``--force``).

    The simulator must run for pods to appear. Returns a ``Workloads`` description.
    """
    rest = _rest(api)
    ensure_namespace(rest, namespace)
    out = Workloads(namespace=namespace)
    _, rs = create_deployment(rest, namespace, "web", web_replicas, pod_template("web", grace=0))
    out.deployments["web"], out.replicasets["web"], out.graces["web"] = web_replicas, rs["metadata"]["name"], 0
    create_pdb(rest, namespace, "web", {"app": "web"}, min_available=min(4, web_replicas))
    out.pdbs["web"] = "web"
    _, rs = create_deployment(rest, namespace, "api", api_replicas, pod_template("api", grace=slow_grace))
    out.deployments["api"], out.replicasets["api"], out.graces["api"] = api_replicas, rs["metadata"]["name"], slow_grace
    create_pdb(rest, namespace, "api", {"app": "api"}, max_unavailable=1)
    out.pdbs["api"] = "api"
    if scratch_replicas:
        rs = create_replicaset(rest, namespace, "scratch", scratch_replicas, pod_template("scratch", empty_dir=True))
        out.deployments["scratch"], out.replicasets["scratch"], out.graces["scratch"] = (
            scratch_replicas,
            rs["metadata"]["name"],
            0,
        )
    if daemonset:
        create_daemonset(rest, namespace, "node-agent", pod_template("node-agent", tolerate_all=True))
        out.daemonset = "node-agent"
    if bare_pod:
        create_bare_pod(rest, namespace, "standalone")
        out.bare_pod = "standalone"
    return out


def deploy_pods_on_node(
    api: ApiClient | KubeRest,
    node_name: str,
    count: int,
    grace: int = 0,
    namespace: str = "bench",
    *,
    name: str | None = None,
    wait: bool = True,
    timeout: float = 30.0,
) -> str:
    """Fill ``node_name`` with ``count`` pods of one ReplicaSet (benchmarks).

    The ReplicaSet carries the ``localworld.node-manager/prefer-node`` annotation: the simulator places its pods on
    ``node_name`` while that node is Ready and schedulable, and elsewhere (least loaded worker) once it is cordoned,
    so evicted pods get replacements on other nodes as in a real cluster. No PDB (add one with ``create_pdb``).

    Args:
        grace: the pods' terminationGracePeriodSeconds.
        wait: return only when ``count`` pods of it are Running and Ready on ``node_name`` (needs the simulator).

    Returns:
        the ReplicaSet's name (default ``fill-<node name prefix>``); its pods are labelled ``app=<name>``.

    Raises:
        TimeoutError: ``wait`` and the pods were not Ready on the node within ``timeout`` seconds.
    """
    rest = _rest(api)
    ensure_namespace(rest, namespace)
    name = name or f"fill-{node_name.split('.')[0]}"[:50]
    create_replicaset(
        rest,
        namespace,
        name,
        count,
        pod_template(name, grace=grace),
        annotations={PREFER_NODE_ANNOTATION: node_name},
    )
    if wait:
        deadline = time.monotonic() + timeout
        while True:
            pods = rest.get(f"/api/v1/namespaces/{q(namespace)}/pods", labelSelector=f"app={name}")["items"]
            ready = [p for p in pods if p["spec"].get("nodeName") == node_name and is_live(p) and pod_ready(p)]
            if len(ready) >= count:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"timed out after {timeout:.0f} s waiting for {count} Ready pods of {name} on {node_name} "
                    f"({len(ready)} ready)"
                )
            time.sleep(0.05)
    return name


def pods_on_node(api: ApiClient | KubeRest, node_name: str) -> list[JSON]:
    """Every pod bound to ``node_name`` (all namespaces), as JSON."""
    return list(_rest(api).get("/api/v1/pods", fieldSelector=f"spec.nodeName={node_name}").get("items", []))


def ready_nodes(api: ApiClient | KubeRest) -> list[JSON]:
    return [n for n in _rest(api).get("/api/v1/nodes").get("items", []) if node_ready(n)]


def wait_pods_ready(
    api: ApiClient | KubeRest, namespace: str, count: int, selector: str | None = None, timeout: float = 15.0
) -> list[JSON]:
    """Wait until ``count`` live pods (matching ``selector``) in ``namespace`` are Ready; return them.

    Raises:
        TimeoutError: fewer after ``timeout`` seconds (the message gives how many).
    """
    rest = _rest(api)
    deadline = time.monotonic() + timeout
    while True:
        items: list[Any] = rest.get(f"/api/v1/namespaces/{q(namespace)}/pods", labelSelector=selector)["items"]
        ready = [p for p in items if is_live(p) and pod_ready(p)]
        if len(ready) >= count:
            return ready
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"timed out after {timeout:.0f} s waiting for {count} Ready pods in {namespace}"
                f" ({selector or 'all'}): {len(ready)} ready of {len(items)}"
            )
        time.sleep(0.05)
