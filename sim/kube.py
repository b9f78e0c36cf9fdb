"""The in-memory Kubernetes cluster's API: what the agent calls (``agent.drain.ports.DrainApi``, the node reads of
``agent.membership.MembershipReporter``), answered as the apiserver answers.

- Reads and node patches: a JSON merge patch (RFC 7386) whose ``metadata.resourceVersion`` differs from the
  node's answers 409 Conflict (optimistic concurrency, "API Concepts - Resource versions":
  https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions); ``patch_node`` returns None then,
  as ``KubeAdapter.patch_node`` does. Node lists come in pages (``limit``/``continue``) of one snapshot.
- Watches: the events after a resourceVersion (ADDED/MODIFIED/DELETED with the object), ending at once (as if
  the apiserver's ``timeoutSeconds`` passed); a resourceVersion older than the kept events answers an ERROR event
  with code 410 Gone (list again).
- The Eviction API ("API-initiated Eviction":
  https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/, pkg/registry/core/pod/storage/eviction.go):
  404 no such pod; a Pending, finished or already terminating pod is deleted without consulting a budget; more
  than one PodDisruptionBudget selecting the pod answers 500; one with ``disruptionsAllowed == 0`` answers 429
  naming it (an unready pod passes while the budget is met and wants a healthy pod, the IfHealthyBudget policy, or
  always with AlwaysAllow); only then the delete's uid precondition naming another pod answers 409 (a blocked pod
  under a stale uid answers 429: tests/integration/sim/test_kube_contract.py shows the apiserver's order); else
  201 and the pod terminates gracefully (``deleteOptions.gracePeriodSeconds`` overrides its own grace). Answers
  are classified with the product's own ``agent.kube.eviction.classify_eviction_error``.
- Faults: ``faults.check("kube", <operation>)`` answering ``TooManyRequests`` raises
  ``KubernetesTooManyRequestsError`` (an eviction answers a 429 that names no budget: API Priority and Fairness);
  any other code a 5xx (``KubernetesApiError``; an eviction answers a retryable 500).

Nothing here sleeps or spawns threads; all time is the kernel's.

Usage (the world wires it to the simulated EC2 and Auto Scaling)::

    kube = SimKube(kernel, faults, event_log=0)            # event_log=0: no watch history (faster)
    kube.add_daemonset("kube-system", "cni")
    kube.add_deployment("default", "web", 300, grace=30)     # pods Pending until a node has room
    kube.add_budget(Budget("default", "web", {"app": "web"}, max_unavailable="10%"))
    kube.add_node(name, instance_id, az, instance_group="nodes-us-east-1a")   # an instance's kubelet joined
    kube.set_node_ready(name, False)                         # the instance stopped answering
    kube.remove_instance(instance_id)                        # terminated: its pods end (counters)
    kube.patch_node(name, {"spec": {"unschedulable": True}}) # an operator's ``kubectl cordon``
    kube.counters, kube.unschedulable_pod_seconds, kube.ready_workers()   # the benchmark's and invariants' reads
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agent.kube.eviction import EvictionResponse, EvictionStatus, classify_eviction_error
from agent.kube.views import NodeEvent, NodeView, PodEvent, PodView
from agent.kube.watch import PodWatch
from core.exceptions import KubernetesApiError, KubernetesNotFoundError, KubernetesTooManyRequestsError
from sim.kube_model import PodInfo
from sim.kube_objects import CONTROL_PLANE_LABEL, MULTIPLE_PDBS, is_ready, merge_patch, pdb_refusal, status_body
from sim.kube_workloads import Workloads

HTTP_GONE = 410


class SimPodWatch(PodWatch):
    """A finished watch: the events it was opened on, then the end (no threads, no connection)."""

    def __init__(self, events: list[PodEvent]) -> None:
        self._events = events
        self.closed = False

    def __iter__(self) -> Iterator[PodEvent]:
        for event in self._events:
            if self.closed:
                return
            yield event

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> SimPodWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SimKube(Workloads):
    """The cluster with the API the agent calls (see the module docstring; construction as ``Cluster``)."""

    _listed: tuple[int, list[NodeView]] | None = None  # (node_version, every node's view by name) of the last list
    _held: dict[str, list[tuple[str, str]]] | None = None  # node -> (pod, uid) whose deletion its kubelet must confirm

    # ------------------------------------------------------------------------------------------ node health

    def set_node_ready(self, name: str, ready: bool) -> None:
        """``Cluster.set_node_ready``; Ready again, the deletions its kubelet could not confirm meanwhile end now."""
        super().set_node_ready(name, ready)
        held = self._held.pop(name, None) if ready and self._held else None
        for key, uid in held or ():
            super()._gone(key, uid)

    def _gone(self, key: str, uid: str) -> None:
        """A graceful deletion's grace ended: the pod goes, unless its node is NotReady (its kubelet, which confirms
        the deletion, does not answer: the pod stays ``Terminating`` until the node is Ready again or goes; Kubernetes
        documentation, "Pod Lifecycle", "Termination of Pods")."""
        info = self.pods.get(key)
        node = self.nodes.get(info.node) if info is not None and info.node else None
        if node is not None and info is not None and info.obj["metadata"]["uid"] == uid and not is_ready(node):
            if self._held is None:
                self._held = {}
            self._held.setdefault(info.node, []).append((key, uid))
            return
        super()._gone(key, uid)

    def remove_node(self, name: str) -> None:
        """``Cluster.remove_node``: its pods go with it, held deletions too."""
        if self._held:
            self._held.pop(name, None)
        super().remove_node(name)

    # --------------------------------------------------------------------------------------------- faults

    def _fault(self, operation: str) -> None:
        code = None if self.faults is None else self.faults.check("kube", operation)
        if code == "TooManyRequests":
            raise KubernetesTooManyRequestsError(f"{operation}: HTTP 429 {code}", 1.0)
        if code is not None:
            raise KubernetesApiError(f"{operation}: HTTP 500 {code}")

    # ---------------------------------------------------------------------------------------------- nodes

    def get_node(self, name: str) -> NodeView | None:
        """The node called ``name``, None if there is none."""
        self._fault("get_node")
        return self.node_views.get(name)

    def node_for_instance(self, instance_id: str, scan: bool = True) -> NodeView | None:
        """The node whose ``spec.providerID`` names ``instance_id``, None if there is none (``scan`` or not: the
        simulated cluster answers from its own index, as the agent's watch-fed one would)."""
        self._fault("list_nodes")
        name = self.instances.get(instance_id)
        return None if name is None else self.node_views[name]

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> NodeView | None:
        """Merge-patch the node; None when the patch's ``metadata.resourceVersion`` is not the node's (409).

        Raises:
            KubernetesNotFoundError: no such node.
        """
        self._fault("patch_node")
        obj = self.nodes.get(name)
        if obj is None:
            raise KubernetesNotFoundError(f"patch node {name}: HTTP 404 nodes {name!r} not found")
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            return None
        was_unschedulable = bool(obj["spec"].get("unschedulable"))
        patched = merge_patch(obj, patch)
        patched["metadata"]["name"] = name
        self.nodes[name] = patched
        self._node_event("MODIFIED", patched)
        if was_unschedulable and not patched["spec"].get("unschedulable"):
            self._want_schedule()
        return self.node_views[name]

    def list_node_pages(self, page_size: int | None = None) -> Iterator[tuple[list[NodeView], str]]:
        """Every node (by name), ``page_size`` (default 500) at a time, all pages one snapshot carrying its
        resourceVersion."""
        self._fault("list_nodes")
        size = page_size or 500
        listed = self._listed
        if listed is None or listed[0] != self.node_version:  # sorted again only after a node changed
            listed = self._listed = (self.node_version, [self.node_views[name] for name in sorted(self.node_views)])
        views = listed[1]
        version = str(self._rv)
        for start in range(0, max(1, len(views)), size):
            yield views[start : start + size], version

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> list[NodeEvent]:
        """The node events after ``resource_version`` (an ERROR 410 when they are no longer kept)."""
        self._fault("watch_nodes")
        after = int(resource_version or 0)
        if self.node_log and self.node_log[0][0] > after + 1:
            return [NodeEvent(type="ERROR", code=HTTP_GONE)]
        events = []
        for rv, event in reversed(self.node_log):  # the newest first: a watch from a recent version reads only its
            if rv <= after:  # own events, not the whole log
                break
            events.append(event)
        events.reverse()
        return events

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        self._fault("get_daemonset")
        return f"{namespace}/{name}" in self.daemonsets

    # ----------------------------------------------------------------------------------------------- pods

    def list_pods_on_node(self, node_name: str) -> tuple[list[PodView], str]:
        """The pods bound to ``node_name`` (in creation order) and the list's resourceVersion."""
        self._fault("list_pods")
        keys = self.by_node.get(node_name, {})
        return [self.pod_view(self.pods[key]) for key in keys], str(self._rv)

    def watch_pods_on_node(self, node_name: str, resource_version: str, timeout_seconds: int) -> PodWatch:
        """The events of the node's pods after ``resource_version``, then the end (an ERROR 410 when the events
        are no longer kept)."""
        self._fault("watch_pods")
        after = int(resource_version or 0)
        if self.pod_log and self.pod_log[0][0] > after + 1:
            return SimPodWatch([PodEvent(type="ERROR", code=HTTP_GONE)])
        return SimPodWatch([event for rv, node, event in self.pod_log if rv > after and node == node_name])

    def budget_status(self, namespace: str, name: str) -> tuple[int, int, int]:
        """(disruptionsAllowed, desiredHealthy, currentHealthy) of the budget, as its status would say."""
        key = f"{namespace}/{name}"
        budget = self.budgets[key]
        counts = self.budget_counts[key]
        replicas = sum(self.deployments[d[len("deploy:") :]].replicas for d in counts.deploys)
        healthy = counts.healthy
        expected = replicas + counts.others
        desired = budget.desired_healthy(expected)
        return max(0, healthy - desired), desired, healthy

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        """POST an Eviction (see the module docstring for the answers); never raises."""
        code = None if self.faults is None else self.faults.check("kube", "evict")
        if code is not None:
            status = 429 if code == "TooManyRequests" else 500
            return classify_eviction_error(status, status_body(status, code, f"injected {code}"))
        info = self.pods.get(f"{namespace}/{name}")
        if info is None:
            return classify_eviction_error(404, status_body(404, "NotFound", f'pods "{name}" not found'))
        phase = info.obj["status"]["phase"]
        ignores_budgets = info.terminating or phase in ("Pending", "Succeeded", "Failed") or not info.node
        if not ignores_budgets:
            if len(info.budgets) > 1:
                info.refused_by_budget = True
                return classify_eviction_error(500, MULTIPLE_PDBS)
            if info.budgets:
                ns, budget_name = info.budgets[0].split("/", 1)
                allowed, desired, healthy = self.budget_status(ns, budget_name)
                unhealthy_passes = not is_ready(info.obj) and (
                    self.budgets[info.budgets[0]].always_allow_unhealthy or healthy >= desired > 0
                )
                if allowed <= 0 and not unhealthy_passes:
                    info.refused_by_budget = True
                    self.counters.evictions_refused += 1
                    return classify_eviction_error(429, pdb_refusal(budget_name, desired, healthy))
        if uid is not None and info.obj["metadata"]["uid"] != uid:  # the delete's precondition, after the budget
            return classify_eviction_error(409, status_body(409, "Conflict", "Precondition failed: UID mismatch"))
        if not ignores_budgets and info.workload:
            self.counters.stopped_by_eviction += 1
        self._stopped(info, "evict")
        self._terminate(info, grace_period_seconds)
        return EvictionResponse(EvictionStatus.EVICTED, 201)

    def delete_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> bool:
        """DELETE a pod (graceful, no budget consulted); False when it is gone or the uid names another pod."""
        self._fault("delete_pod")
        info = self.pods.get(f"{namespace}/{name}")
        if info is None or (uid is not None and info.obj["metadata"]["uid"] != uid):
            return False
        if info.workload and not info.terminating and info.node and info.obj["status"]["phase"] == "Running":
            self.counters.stopped_by_delete += 1
        self._stopped(info, "delete")
        self._terminate(info, grace_period_seconds)
        return True

    def _stopped(self, info: PodInfo, verb: str) -> None:
        """Tell the ``stops`` observers that an eviction or a DELETE of a pod on a node was accepted (the pod as it
        was before: not yet terminating)."""
        if info.node:
            for observer in self.stops:
                observer(info.node, verb, info)

    # -------------------------------------------------------------------------------------------- queries

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        """The pod's bookkeeping (tests, invariants)."""
        return self.pods.get(f"{namespace}/{name}")

    def node_view(self, name: str) -> NodeView | None:
        """The node without fault injection (invariants)."""
        return self.node_views.get(name)

    def ready_workers(self) -> list[str]:
        """Names of Ready non-control-plane nodes (invariants)."""
        return [
            name
            for name, obj in self.nodes.items()
            if is_ready(obj) and CONTROL_PLANE_LABEL not in obj["metadata"]["labels"]
        ]
