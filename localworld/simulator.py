"""Plays kubelet, scheduler and a few controllers for the local kube-apiserver, as kwok does.

No kubelet or controller-manager runs in the local world. ``ClusterSimulator`` keeps the cluster's Kubernetes side
consistent with moto's EC2 and with the workload objects, so the product's drain code meets the API behaviour it
meets in a real cluster:

- **cloud node lifecycle / kubelet registration**: a Node per running or pending EC2 instance tagged
  ``KubernetesCluster=<cluster>`` (kOps propagates the tag), named by private DNS name or instance id, with
  ``spec.providerID = aws:///<az>/<instance-id>`` and kOps' labels, marked Ready through the status subresource.
  The Node is deleted when its instance is shutting-down, terminated or gone (the cloud node controller does this).
- **scheduler**: binds unbound pods to the least loaded Ready, schedulable node whose labels match the pod's
  ``nodeSelector`` and whose taints it tolerates (node affinity is not evaluated).
- **ReplicaSet controller**: keeps ``spec.replicas`` live (not terminating) pods per ReplicaSet, with
  ownerReferences; scales down by deleting the surplus. A ReplicaSet annotated ``localworld.node-manager/prefer-node``
  gets its pods on that node while it is a candidate (for benchmarks that fill one node).
- **DaemonSet controller**: one pod per node whose labels match the template's ``nodeSelector`` and whose taints the
  template tolerates; cordoned (unschedulable) nodes keep theirs.
- **kubelet**: marks bound pods Running with Ready=True once their node is Ready; completes a graceful deletion
  (``deletionTimestamp`` set) by deleting with grace 0 once ``deletionGracePeriodSeconds`` have passed since the
  simulator saw it.
- **pod GC / garbage collector**: deletes pods of a Node that went away (grace 0), and pods, ReplicaSets whose
  controller owner is gone (after 2 s).
- **disruption controller**: keeps PodDisruptionBudget status (policy/v1beta1) current: ``currentHealthy``,
  ``desiredHealthy``, ``disruptionsAllowed``, ``expectedPods``, ``observedGeneration``, and prunes ``disruptedPods``
  (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/). Without ``observedGeneration`` the Eviction
  API refuses every eviction. Updates use the PDB's resourceVersion (optimistic concurrency), as the real controller
  does, so a stale status never overwrites an eviction's decrement.

Speed: informers (list + watch) keep caches of Nodes, Pods, ReplicaSets, DaemonSets, Deployments and PDBs; every
change wakes one reconcile pass that works on the caches in memory and applies its writes concurrently; the simulator's
own writes go into the caches at once (newer resourceVersion wins), so a pass never acts twice on the same fact.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any, TypeVar

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS
from localworld.rest import JSON, KubeRest, q

log = logging.getLogger("localworld.simulator")

T = TypeVar("T")

SIMULATED_ANNOTATION = "localworld.node-manager/simulated"
PREFER_NODE_ANNOTATION = "localworld.node-manager/prefer-node"
MASTER_TAINT = {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}
LIVE_STATES = ("pending", "running")
GONE_STATES = ("shutting-down", "terminated")
DISRUPTED_POD_TIMEOUT = 120.0  # seconds; the disruption controller's DeletionTimeout
OWNER_GRACE = 2.0  # seconds an owner may be missing from the cache before its dependents are collected
EC2_FULL_RESYNC = 5.0  # seconds between full DescribeInstances reads when nothing seems to change

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


def _rv(obj: Mapping[str, Any]) -> int:
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


def scaled_value(value: int | str, total: int, round_up: bool) -> int:
    """An IntOrString (``3`` or ``"50%"``) relative to ``total`` (``intstr.GetScaledValueFromIntOrPercent``)."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        raw = pct * total / 100
        return math.ceil(raw) if round_up else math.floor(raw)
    return int(text)


def expected_scale(
    matched: list[JSON],
    rsets: Mapping[str, JSON],
    dsets: Mapping[str, JSON],
    deploys: Mapping[str, JSON],
) -> int | None:
    """Sum of the matched pods' controllers' desired replicas; None when a pod has no controller."""
    by_uid = {o["metadata"]["uid"]: (kind, o) for kind, group in (("rs", rsets), ("ds", dsets)) for o in group.values()}
    deploy_by_uid = {d["metadata"]["uid"]: d for d in deploys.values()}
    scales: dict[str, int] = {}
    ds_counts: dict[str, int] = {}
    for pod in matched:
        ref = controller_of(pod)
        if ref is None:
            return None
        kind_obj = by_uid.get(ref["uid"])
        if kind_obj is None:
            scales.setdefault(ref["uid"], 0)
            continue
        kind, owner = kind_obj
        if kind == "ds":
            ds_counts[ref["uid"]] = ds_counts.get(ref["uid"], 0) + 1
            continue
        parent = controller_of(owner)
        if parent and parent.get("kind") == "Deployment" and parent["uid"] in deploy_by_uid:
            deploy = deploy_by_uid[parent["uid"]]
            scales[parent["uid"]] = int((deploy.get("spec") or {}).get("replicas", 1))
        else:
            scales[ref["uid"]] = int((owner.get("spec") or {}).get("replicas", 1))
    return sum(scales.values()) + sum(ds_counts.values())


def pdb_status(
    pdb: Mapping[str, Any],
    pods: Mapping[str, JSON],
    rsets: Mapping[str, JSON],
    dsets: Mapping[str, JSON],
    deploys: Mapping[str, JSON],
    now: float | None = None,
) -> JSON:
    """The status the disruption controller would write for ``pdb`` (pure: caches in, status out)."""
    now = time.time() if now is None else now
    meta, spec = pdb["metadata"], pdb.get("spec") or {}
    old = pdb.get("status") or {}
    ns = meta["namespace"]
    matched = [
        p
        for p in pods.values()
        if p["metadata"]["namespace"] == ns
        and selector_matches(spec.get("selector"), p["metadata"].get("labels") or {}, empty_matches=False)
    ]
    names = {p["metadata"]["name"]: p for p in matched}
    disrupted: dict[str, str] = {}
    for name, stamp in (old.get("disruptedPods") or {}).items():
        pod = names.get(name)
        if pod is None or is_terminating(pod):
            continue
        at = parse_time(stamp)
        if at is not None and at + DISRUPTED_POD_TIMEOUT < now:
            continue
        disrupted[name] = stamp
    healthy = sum(
        1 for p in matched if pod_ready(p) and not is_terminating(p) and p["metadata"]["name"] not in disrupted
    )
    fail_safe = False
    if spec.get("maxUnavailable") is not None:
        expected = expected_scale(matched, rsets, dsets, deploys)
        if expected is None:
            fail_safe, expected = True, len(matched)
        unavailable = scaled_value(spec["maxUnavailable"], expected, round_up=True)
        desired = max(0, expected - unavailable)
    elif isinstance(spec.get("minAvailable"), str) and str(spec["minAvailable"]).endswith("%"):
        expected = expected_scale(matched, rsets, dsets, deploys)
        if expected is None:
            fail_safe, expected = True, len(matched)
        desired = scaled_value(spec["minAvailable"], expected, round_up=True)
    else:
        expected = len(matched)
        desired = int(spec.get("minAvailable", 1) if spec.get("minAvailable") is not None else 1)
    allowed = 0 if fail_safe or expected <= 0 else max(0, healthy - desired)
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "observedGeneration": int(meta.get("generation", 1)),
        "disruptedPods": disrupted or None,
    }


class _Informer:
    """List + watch one resource into a dict keyed ``namespace/name``; calls ``on_change`` after each change."""

    def __init__(self, rest: KubeRest, resource: str, on_change: Callable[[], None], stop: threading.Event) -> None:
        self.rest = rest
        self.resource = resource
        self.path = PATHS[resource]
        self.api_version, self.kind = KINDS[resource]
        self.on_change = on_change
        self.stop_event = stop
        self.items: dict[str, JSON] = {}
        self.synced = threading.Event()
        self.lock = threading.Lock()
        self._tombstones: dict[str, int] = {}
        self._resp: Any = None
        self.thread = threading.Thread(target=self._run, name=f"informer-{resource}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def snapshot(self) -> dict[str, JSON]:
        with self.lock:
            return dict(self.items)

    def apply(self, obj: JSON) -> None:
        """Store ``obj`` unless the cache already holds a newer version of it (or saw it deleted later)."""
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        key = key_of(obj)
        rv = _rv(obj)
        with self.lock:
            current = self.items.get(key)
            if current is not None and _rv(current) > rv:
                return
            if self._tombstones.get(key, -1) >= rv:
                return
            self.items[key] = obj

    def remove(self, obj: JSON) -> None:
        key = key_of(obj)
        with self.lock:
            current = self.items.get(key)
            if current is not None and current["metadata"].get("uid") != obj["metadata"].get("uid"):
                return
            self.items.pop(key, None)
            self._tombstones[key] = max(_rv(obj), self._tombstones.get(key, 0))
            if len(self._tombstones) > 5000:
                for old in list(self._tombstones)[:2500]:
                    self._tombstones.pop(old, None)

    def close(self) -> None:
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:  # noqa: BLE001 - best effort interruption of a blocking read
                pass

    def _set_resp(self, resp: Any) -> None:
        self._resp = resp

    def _run(self) -> None:
        while not self.stop_event.is_set():
            try:
                listing = self.rest.get(self.path)
                rv = listing["metadata"]["resourceVersion"]
                items = {}
                for obj in listing.get("items", []):
                    obj.setdefault("apiVersion", self.api_version)
                    obj.setdefault("kind", self.kind)
                    items[key_of(obj)] = obj
                with self.lock:
                    self.items = items
                    self._tombstones.clear()
                self.synced.set()
                self.on_change()
                while not self.stop_event.is_set():
                    relist = False
                    for event in self.rest.watch_lines(self.path, rv, timeout_seconds=30, on_open=self._set_resp):
                        if self.stop_event.is_set():
                            return
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            relist = True
                            break
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if kind == "BOOKMARK":
                            continue
                        if kind == "DELETED":
                            self.remove(obj)
                        else:
                            self.apply(obj)
                        self.on_change()
                    if relist:
                        break
            except Exception as err:  # noqa: BLE001 - keep watching; the server may be restarting
                if self.stop_event.is_set():
                    return
                log.debug("informer %s: %s; re-listing", self.resource, err)
                self.stop_event.wait(0.2)


class ClusterSimulator:
    """Background threads playing kubelet, scheduler and controllers for one kOps cluster (see module doc).

    Args:
        ec2_client: boto3 EC2 client (moto); used only by the simulator's EC2 thread.
        api_client: ``kubernetes.client.ApiClient`` with admin rights and a connection pool of >= 32.
        cluster_name: the ``KubernetesCluster`` tag value whose instances become Nodes.
        node_naming: ``"dns"`` (private DNS name, ``ip-10-0-0-5.ec2.internal``) or ``"id"`` (instance id), the two
            ways kOps names nodes.
        interval: seconds between reconcile passes when nothing wakes the loop earlier (<= 0.05 keeps it quick).
        ec2_interval: seconds between DescribeInstances polls.
        join_delay: seconds between the simulator first seeing an instance and its Node registering.
        workers: concurrent API writes per pass.
    """

    def __init__(
        self,
        ec2_client: Any,
        api_client: ApiClient,
        cluster_name: str,
        *,
        node_naming: str = "dns",
        interval: float = 0.05,
        ec2_interval: float = 0.2,
        join_delay: float = 0.0,
        workers: int = 16,
    ) -> None:
        if node_naming not in ("dns", "id"):
            raise ValueError("node_naming must be 'dns' or 'id'")
        self.ec2 = ec2_client
        self.rest = KubeRest(api_client)
        self.cluster = cluster_name
        self.node_naming = node_naming
        self.interval = interval
        self.ec2_interval = ec2_interval
        self.join_delay = join_delay
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._informers = {name: _Informer(self.rest, name, self._wake.set, self._stop) for name in PATHS}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="simulator-write")
        self._threads: list[threading.Thread] = []
        self._never_join: set[str] = set()
        self._instances: dict[str, JSON] | None = None
        self._first_seen: dict[str, float] = {}
        self._terminating_since: dict[str, float] = {}
        self._owner_missing_since: dict[str, float] = {}
        self._known_nodes: set[str] = set()
        self._recent: dict[tuple[str, str], float] = {}
        self._ip_counter = 0
        self._lock = threading.Lock()
        self._passes = 0
        self._idle_passes = 0
        self._last_actions = -1
        self.errors = 0
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ClusterSimulator:
        """Start the informers, the EC2 poller and the reconcile loop. Idempotent."""
        if self._started:
            return self
        self._started = True
        for informer in self._informers.values():
            informer.start()
        for target, name in ((self._ec2_loop, "simulator-ec2"), (self._loop, "simulator-reconcile")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop all threads; returns once the reconcile loop made its last write (at most ``timeout`` s)."""
        self._stop.set()
        self._wake.set()
        for informer in self._informers.values():
            informer.close()
        for thread in self._threads:
            thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for informer in self._informers.values():
            informer.thread.join(0.5)

    def __enter__(self) -> ClusterSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def never_join(self, instance_id: str) -> None:
        """The instance never gets a Node (a node that fails to join)."""
        with self._lock:
            self._never_join.add(instance_id)
        self._wake.set()

    def allow_join(self, instance_id: str) -> None:
        with self._lock:
            self._never_join.discard(instance_id)
        self._wake.set()

    # ------------------------------------------------------------------ cache views
    def nodes(self) -> list[JSON]:
        """Nodes as the simulator's cache has them (dicts as the API returns them)."""
        return list(self._informers["nodes"].snapshot().values())

    def pods(self, namespace: str | None = None) -> list[JSON]:
        pods = self._informers["pods"].snapshot().values()
        return [p for p in pods if namespace is None or p["metadata"]["namespace"] == namespace]

    def pdbs(self, namespace: str | None = None) -> list[JSON]:
        pdbs = self._informers["pdbs"].snapshot().values()
        return [p for p in pdbs if namespace is None or p["metadata"]["namespace"] == namespace]

    def node_for_instance(self, instance_id: str) -> JSON | None:
        for node in self.nodes():
            if (node.get("spec") or {}).get("providerID", "").endswith(f"/{instance_id}"):
                return node
        return None

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers.values()) and self._instances is not None

    # ------------------------------------------------------------------ waits
    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str, poll: float = 0.02) -> T:
        """Call ``predicate`` every ``poll`` s until it returns a truthy value, and return that value.

        Raises:
            TimeoutError: still falsy after ``timeout`` seconds; the message names ``what``.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
            time.sleep(poll)

    def nodes_ready(self, n: int, timeout: float = 30.0) -> list[JSON]:
        """Wait until at least ``n`` Nodes are Ready (in the cache); return the Ready nodes.

        Raises:
            TimeoutError: fewer than ``n`` after ``timeout`` seconds.
        """

        def ready() -> list[JSON]:
            nodes = [node for node in self.nodes() if node_ready(node)]
            return nodes if len(nodes) >= n else []

        return self.wait_for(ready, timeout, f"{n} Ready nodes")

    def wait_settled(self, timeout: float = 10.0) -> None:
        """Wait until two reconcile passes in a row found nothing to do (after this call).

        Raises:
            TimeoutError: the world kept changing for ``timeout`` seconds.
        """
        start = self._passes
        self.wait_for(lambda: self._passes >= start + 2 and self._idle_passes >= 2, timeout, "the simulator to settle")

    # ------------------------------------------------------------------ EC2
    def _ec2_loop(self) -> None:
        """Poll EC2: a cheap DescribeInstanceStatus every ``ec2_interval`` s detects a change (moto renders it in
        ~10 ms, DescribeInstances in ~35 ms of CPU); the cluster's instances are re-read on a change and at least
        every ``EC2_FULL_RESYNC`` s."""
        last_status: set[tuple[str, str]] | None = None
        last_full = 0.0
        while not self._stop.is_set():
            try:
                statuses = self.ec2.describe_instance_status(IncludeAllInstances=True)
                current = {(s["InstanceId"], s["InstanceState"]["Name"]) for s in statuses["InstanceStatuses"]}
                while statuses.get("NextToken"):
                    statuses = self.ec2.describe_instance_status(
                        IncludeAllInstances=True, NextToken=statuses["NextToken"]
                    )
                    current |= {(s["InstanceId"], s["InstanceState"]["Name"]) for s in statuses["InstanceStatuses"]}
                if current != last_status or time.monotonic() - last_full >= EC2_FULL_RESYNC:
                    self._instances = self._describe_cluster_instances()
                    last_status, last_full = current, time.monotonic()
                    self._wake.set()
            except Exception:
                if self._stop.is_set():
                    return
                self.errors += 1
                log.exception("EC2 poll failed")
            self._stop.wait(self.ec2_interval)

    def _describe_cluster_instances(self) -> dict[str, JSON]:
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster]}]
        )
        return {inst["InstanceId"]: inst for page in pages for res in page["Reservations"] for inst in res["Instances"]}

    # ------------------------------------------------------------------ loop
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self.synced:
                continue
            try:
                actions = self._plan()
                if actions:
                    futures = [self._pool.submit(self._run_action, name, fn) for name, fn in actions]
                    wait(futures)
                    self._wake.set()  # look again at once: our writes may enable more work
                self._idle_passes = 0 if actions else self._idle_passes + 1
                self._last_actions = len(actions)
            except Exception:
                if self._stop.is_set():
                    return
                self.errors += 1
                log.exception("simulator pass failed")
                self._idle_passes = 0
            self._passes += 1

    def _run_action(self, name: str, fn: Callable[[], None]) -> None:
        if self._stop.is_set():
            return
        try:
            fn()
        except ApiException as err:
            if err.status in (404, 409):
                log.debug("%s: %s %s", name, err.status, err.reason)
            else:
                self.errors += 1
                log.warning("%s failed: %s %s %s", name, err.status, err.reason, (err.body or "")[:300])
        except Exception:
            if not self._stop.is_set():
                self.errors += 1
                log.exception("%s failed", name)

    def _recently(self, kind: str, key: str, hold: float = 2.0) -> bool:
        """True when the same action on ``key`` was planned less than ``hold`` s ago; else records it now."""
        now = time.monotonic()
        if self._recent.get((kind, key), 0.0) > now:
            return True
        self._recent[(kind, key)] = now + hold
        if len(self._recent) > 20000:
            self._recent = {k: v for k, v in self._recent.items() if v > now}
        return False

    def _plan(self) -> list[tuple[str, Callable[[], None]]]:
        nodes = self._informers["nodes"].snapshot()
        pods = self._informers["pods"].snapshot()
        rsets = self._informers["replicasets"].snapshot()
        dsets = self._informers["daemonsets"].snapshot()
        deploys = self._informers["deployments"].snapshot()
        pdbs = self._informers["pdbs"].snapshot()
        actions: list[tuple[str, Callable[[], None]]] = []
        self._plan_nodes(nodes, actions)
        by_node = {n["metadata"]["name"]: n for n in nodes.values()}
        self._known_nodes |= set(by_node)
        self._plan_kubelet(pods, by_node, actions)
        load = self._load(pods, by_node)
        self._plan_replicasets(rsets, pods, by_node, load, actions)
        self._plan_daemonsets(dsets, pods, by_node, actions)
        self._plan_scheduler(pods, by_node, load, actions)
        self._plan_gc(pods, rsets, dsets, deploys, actions)
        self._plan_pdbs(pdbs, pods, rsets, dsets, deploys, actions)
        return actions

    # ------------------------------------------------------------------ nodes
    def _node_name(self, inst: Mapping[str, Any]) -> str:
        if self.node_naming == "id" or not inst.get("PrivateDnsName"):
            return str(inst["InstanceId"])
        return str(inst["PrivateDnsName"])

    def _plan_nodes(self, nodes: Mapping[str, JSON], actions: list[tuple[str, Callable[[], None]]]) -> None:
        instances = self._instances or {}
        now = time.monotonic()
        with self._lock:
            never = set(self._never_join)
        by_instance: dict[str, JSON] = {}
        for node in nodes.values():
            provider = (node.get("spec") or {}).get("providerID", "")
            if provider.startswith("aws:///"):
                by_instance[provider.rsplit("/", 1)[-1]] = node
        for iid, inst in instances.items():
            state = inst["State"]["Name"]
            if state in LIVE_STATES:
                self._first_seen.setdefault(iid, now)
            if state not in LIVE_STATES or iid in never or iid in by_instance:
                continue
            if now - self._first_seen[iid] < self.join_delay:
                continue
            if self._recently("register", iid, hold=5.0):
                continue
            actions.append((f"register node for {iid}", lambda inst=inst: self._register(inst)))
        for iid, node in by_instance.items():
            annotations = node["metadata"].get("annotations") or {}
            if annotations.get(SIMULATED_ANNOTATION) != "true":
                continue
            inst = instances.get(iid)
            gone = inst is None or inst["State"]["Name"] in GONE_STATES
            name = node["metadata"]["name"]
            if gone and not self._recently("delete-node", name):
                actions.append((f"delete node {name}", lambda name=name: self._delete_node(name)))
            elif not gone and not node_ready(node) and not self._recently("node-ready", name):
                actions.append((f"mark node {name} Ready", lambda inst=inst, name=name: self._mark_ready(name, inst)))

    def _register(self, inst: Mapping[str, Any]) -> None:
        tags = {t["Key"]: t.get("Value", "") for t in inst.get("Tags") or []}
        master = any(t in tags for t in MASTER_ROLE_TAGS)
        name = self._node_name(inst)
        az = inst["Placement"]["AvailabilityZone"]
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": az,
            "topology.kubernetes.io/region": az[:-1],
            "node.kubernetes.io/instance-type": inst.get("InstanceType", ""),
            "kubernetes.io/role": "master" if master else "node",
        }
        if tags.get(INSTANCE_GROUP_TAG):
            labels["kops.k8s.io/instancegroup"] = tags[INSTANCE_GROUP_TAG]
        if master:
            labels["node-role.kubernetes.io/master"] = ""
            labels["node-role.kubernetes.io/control-plane"] = ""
        else:
            labels["node-role.kubernetes.io/node"] = ""
        if inst.get("InstanceLifecycle") == "spot":
            labels["node.kubernetes.io/lifecycle"] = "spot"
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {SIMULATED_ANNOTATION: "true"},
            },
            "spec": {
                "providerID": f"aws:///{az}/{inst['InstanceId']}",
                "taints": [MASTER_TAINT] if master else [],
            },
        }
        try:
            created = self.rest.post(PATHS["nodes"], body)
        except ApiException as err:
            if err.status != 409:
                raise
            created = self.rest.get(f"{PATHS['nodes']}/{q(name)}")
        self._informers["nodes"].apply(created)
        self._mark_ready(name, inst)
        log.debug("registered node %s for %s", name, inst["InstanceId"])

    def _mark_ready(self, name: str, inst: Mapping[str, Any] | None) -> None:
        ts = now_rfc3339()
        addresses = [{"type": "Hostname", "address": name}]
        if inst is not None and inst.get("PrivateIpAddress"):
            addresses.insert(0, {"type": "InternalIP", "address": inst["PrivateIpAddress"]})
        if inst is not None and inst.get("PrivateDnsName"):
            addresses.append({"type": "InternalDNS", "address": inst["PrivateDnsName"]})
        resources = {"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status (simulated)",
                        "lastHeartbeatTime": ts,
                        "lastTransitionTime": ts,
                    }
                ],
                "addresses": addresses,
                "capacity": resources,
                "allocatable": resources,
                "nodeInfo": {
                    "kubeletVersion": "v1.20.2",
                    "kubeProxyVersion": "v1.20.2",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "containerd://1.4.3",
                    "osImage": "Ubuntu 20.04 LTS (simulated)",
                    "kernelVersion": "5.4.0",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
            }
        }
        updated = self.rest.patch(f"{PATHS['nodes']}/{q(name)}/status", status)
        self._informers["nodes"].apply(updated)

    def _delete_node(self, name: str) -> None:
        self.rest.delete_quiet(f"{PATHS['nodes']}/{q(name)}")
        log.debug("deleted node %s (instance gone)", name)

    # ------------------------------------------------------------------ kubelet
    def _plan_kubelet(
        self, pods: Mapping[str, JSON], nodes: Mapping[str, JSON], actions: list[tuple[str, Callable[[], None]]]
    ) -> None:
        now = time.monotonic()
        seen_terminating = set()
        for key, pod in pods.items():
            meta, spec = pod["metadata"], pod.get("spec") or {}
            uid = meta["uid"]
            node_name = spec.get("nodeName")
            if node_name and node_name not in nodes and node_name in self._known_nodes:
                if not self._recently("gc-orphan", uid):
                    actions.append((f"delete pod {key} of deleted node", lambda pod=pod: self._force_delete(pod)))
                continue
            if is_terminating(pod):
                seen_terminating.add(uid)
                since = self._terminating_since.setdefault(uid, now)
                grace = meta.get("deletionGracePeriodSeconds")
                grace = 0 if grace is None else int(grace)
                if grace > 0 and now - since >= grace and not self._recently("finish-delete", uid):
                    actions.append((f"finish deletion of {key}", lambda pod=pod: self._force_delete(pod)))
                continue
            if not node_name or is_finished(pod):
                continue
            node = nodes.get(node_name)
            if node is None or not node_ready(node):
                continue
            status = pod.get("status") or {}
            if status.get("phase") == "Running" and pod_ready(pod):
                continue
            if not self._recently("run", uid):
                actions.append((f"start pod {key}", lambda pod=pod, node=node: self._run_pod(pod, node)))
        for uid in list(self._terminating_since):
            if uid not in seen_terminating:
                del self._terminating_since[uid]

    def _pod_path(self, pod: Mapping[str, Any]) -> str:
        meta = pod["metadata"]
        return f"/api/v1/namespaces/{q(meta['namespace'])}/pods/{q(meta['name'])}"

    def _force_delete(self, pod: JSON) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": pod["metadata"]["uid"]},
        }
        try:
            self.rest.request("DELETE", self._pod_path(pod), body=body)
        except ApiException as err:
            if err.status not in (404, 409):
                raise
        self._informers["pods"].remove(pod)

    def _next_ip(self) -> str:
        with self._lock:
            self._ip_counter += 1
            n = self._ip_counter
        return f"100.96.{(n >> 8) & 255}.{n & 255}"

    def _run_pod(self, pod: JSON, node: Mapping[str, Any]) -> None:
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
        body_path = f"{self._pod_path(pod)}/status"
        updated = self.rest.patch(body_path, status)
        self._informers["pods"].apply(updated)

    # ------------------------------------------------------------------ scheduling
    @staticmethod
    def _load(pods: Mapping[str, JSON], nodes: Mapping[str, JSON]) -> dict[str, int]:
        load = dict.fromkeys(nodes, 0)
        for pod in pods.values():
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name in load and is_live(pod):
                load[node_name] += 1
        return load

    @staticmethod
    def _pick_node(
        spec: Mapping[str, Any], nodes: Mapping[str, JSON], load: dict[str, int], prefer: str | None = None
    ) -> str | None:
        candidates = [name for name, node in nodes.items() if fits(spec, node)]
        if not candidates:
            return None
        if prefer in candidates:
            choice = prefer
        else:
            choice = min(candidates, key=lambda name: (load.get(name, 0), name))
        load[choice] = load.get(choice, 0) + 1
        return choice

    def _plan_scheduler(
        self,
        pods: Mapping[str, JSON],
        nodes: Mapping[str, JSON],
        load: dict[str, int],
        actions: list[tuple[str, Callable[[], None]]],
    ) -> None:
        for key, pod in pods.items():
            spec = pod.get("spec") or {}
            if (
                spec.get("nodeName")
                or not is_live(pod)
                or spec.get("schedulerName", "default-scheduler")
                not in (
                    "default-scheduler",
                    "",
                )
            ):
                continue
            uid = pod["metadata"]["uid"]
            if self._recent.get(("bind", uid), 0.0) > time.monotonic():
                continue
            choice = self._pick_node(spec, nodes, load)
            if choice is None:
                continue
            self._recently("bind", uid)
            actions.append((f"bind {key} to {choice}", lambda pod=pod, node=choice: self._bind(pod, node)))

    def _bind(self, pod: JSON, node: str) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.rest.post(f"{self._pod_path(pod)}/binding", body)

    # ------------------------------------------------------------------ controllers
    def _owned_pods(self, pods: Mapping[str, JSON]) -> dict[str, list[JSON]]:
        owned: dict[str, list[JSON]] = {}
        for pod in pods.values():
            ref = controller_of(pod)
            if ref:
                owned.setdefault(ref["uid"], []).append(pod)
        return owned

    def _new_pod(self, owner: Mapping[str, Any], owner_kind: str, node: str | None) -> JSON:
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

    def _create_pod(self, body: JSON, node: Mapping[str, Any] | None) -> None:
        ns = body["metadata"]["namespace"]
        created = self.rest.post(f"/api/v1/namespaces/{q(ns)}/pods", body)
        self._informers["pods"].apply(created)
        if node is not None and node_ready(node):
            self._run_pod(created, node)

    def _plan_replicasets(
        self,
        rsets: Mapping[str, JSON],
        pods: Mapping[str, JSON],
        nodes: Mapping[str, JSON],
        load: dict[str, int],
        actions: list[tuple[str, Callable[[], None]]],
    ) -> None:
        owned = self._owned_pods(pods)
        for key, rs in rsets.items():
            meta = rs["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            replicas = int((rs.get("spec") or {}).get("replicas", 1))
            live = [p for p in owned.get(meta["uid"], []) if is_live(p)]
            missing = replicas - len(live)
            prefer = (meta.get("annotations") or {}).get(PREFER_NODE_ANNOTATION)
            template_spec = ((rs.get("spec") or {}).get("template") or {}).get("spec") or {}
            for _ in range(max(0, missing)):
                node = self._pick_node(template_spec, nodes, load, prefer)
                body = self._new_pod(rs, "ReplicaSet", node)
                actions.append(
                    (
                        f"create pod for {key}",
                        lambda body=body, node=node: self._create_pod(body, nodes.get(node or "")),
                    )
                )
            if missing < 0:
                # surplus: unbound first, then not ready, then the newest (ReplicaSet controller's ActivePods order)
                victims = sorted(
                    live,
                    key=lambda p: (
                        bool((p.get("spec") or {}).get("nodeName")),
                        pod_ready(p),
                        p["metadata"].get("creationTimestamp", ""),
                    ),
                )
                for pod in victims[:-missing]:
                    if not self._recently("scale-down", pod["metadata"]["uid"]):
                        actions.append((f"scale down {key}", lambda pod=pod: self._delete_pod(pod)))

    def _delete_pod(self, pod: JSON) -> None:
        result = self.rest.request("DELETE", self._pod_path(pod))
        if result.get("kind") == "Pod" and result["metadata"].get("deletionTimestamp"):
            self._informers["pods"].apply(result)
        else:
            self._informers["pods"].remove(pod)

    def _plan_daemonsets(
        self,
        dsets: Mapping[str, JSON],
        pods: Mapping[str, JSON],
        nodes: Mapping[str, JSON],
        actions: list[tuple[str, Callable[[], None]]],
    ) -> None:
        owned = self._owned_pods(pods)
        for key, ds in dsets.items():
            meta = ds["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            on_node = {(p.get("spec") or {}).get("nodeName") for p in owned.get(meta["uid"], []) if is_live(p)}
            for name, node in nodes.items():
                if name in on_node or not fits(template_spec, node, ignore_unschedulable=True):
                    continue
                if self._recently("ds-create", f"{meta['uid']}/{name}"):
                    continue
                body = self._new_pod(ds, "DaemonSet", name)
                actions.append(
                    (f"create {key} pod on {name}", lambda body=body, node=node: self._create_pod(body, node))
                )

    def _plan_gc(
        self,
        pods: Mapping[str, JSON],
        rsets: Mapping[str, JSON],
        dsets: Mapping[str, JSON],
        deploys: Mapping[str, JSON],
        actions: list[tuple[str, Callable[[], None]]],
    ) -> None:
        now = time.monotonic()
        owners = {o["metadata"]["uid"] for group in (rsets, dsets, deploys) for o in group.values()}
        missing_now: set[str] = set()

        def orphaned(obj: Mapping[str, Any]) -> bool:
            ref = controller_of(obj)
            if not ref or ref.get("kind") not in ("ReplicaSet", "DaemonSet", "Deployment"):
                return False
            if ref["uid"] in owners:
                return False
            missing_now.add(ref["uid"])
            since = self._owner_missing_since.setdefault(ref["uid"], now)
            return now - since >= OWNER_GRACE

        for key, pod in pods.items():
            if not is_terminating(pod) and orphaned(pod) and not self._recently("gc", pod["metadata"]["uid"]):
                actions.append((f"collect pod {key}", lambda pod=pod: self._delete_pod(pod)))
        for key, rs in rsets.items():
            if not rs["metadata"].get("deletionTimestamp") and orphaned(rs):
                if not self._recently("gc", rs["metadata"]["uid"]):
                    path = f"/apis/apps/v1/namespaces/{q(rs['metadata']['namespace'])}/replicasets/{q(rs['metadata']['name'])}"
                    actions.append((f"collect replicaset {key}", lambda path=path: self.rest.delete_quiet(path)))
        for uid in list(self._owner_missing_since):
            if uid not in missing_now:
                del self._owner_missing_since[uid]

    # ------------------------------------------------------------------ disruption controller
    def _plan_pdbs(
        self,
        pdbs: Mapping[str, JSON],
        pods: Mapping[str, JSON],
        rsets: Mapping[str, JSON],
        dsets: Mapping[str, JSON],
        deploys: Mapping[str, JSON],
        actions: list[tuple[str, Callable[[], None]]],
    ) -> None:
        now = time.time()
        for key, pdb in pdbs.items():
            status = pdb_status(pdb, pods, rsets, dsets, deploys, now)
            old = pdb.get("status") or {}
            comparable = {k: old.get(k) or None for k in status}
            wanted = {k: v or None for k, v in status.items()}
            if comparable == wanted:
                continue
            rv = pdb["metadata"].get("resourceVersion", "")
            if self._recently("pdb", f"{key}@{rv}", hold=1.0):
                continue
            actions.append((f"update PDB {key} status", lambda pdb=pdb, status=status: self._write_pdb(pdb, status)))

    def _write_pdb(self, pdb: JSON, status: JSON) -> None:
        meta = pdb["metadata"]
        body = {**pdb, "status": {k: v for k, v in status.items() if v is not None}}
        body["status"].setdefault("disruptedPods", None)
        path = f"{PATHS['pdbs'].rsplit('/', 1)[0]}/namespaces/{q(meta['namespace'])}/poddisruptionbudgets/{q(meta['name'])}/status"
        try:
            updated = self.rest.put(path, body)
        except ApiException as err:
            if err.status == 409:  # an eviction changed it first; the next pass recomputes
                return
            raise
        self._informers["pdbs"].apply(updated)
