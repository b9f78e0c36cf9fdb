"""The agent's only door to the Kubernetes API: nodes, pods, evictions, a pod watch and Events.

Everything else in the agent works on the small read-only views defined here (``NodeView``, ``PodView``) and on
the typed outcomes these methods return; no other module imports ``kubernetes.client``'s API classes.

Reads are done with ``_preload_content=False`` and parsed straight from the JSON the apiserver sends (the
generated pydantic models are slow to build for every pod of a node and of every watch event); the conversion
functions ``NodeView.from_api`` and ``PodView.from_api`` take that JSON (the Kubernetes API's own field names)
and are pure.

Errors (Kubernetes API status codes, see
https://kubernetes.io/docs/reference/using-api/api-concepts/#http-status-codes) map to ``core.exceptions``:

- connection failures, timeouts, 429 outside of evictions and 5xx -> ``KubernetesApiError`` (retryable);
- other 4xx (403 forbidden: the agent's ClusterRole lacks a verb; 400; 422) -> ``KubernetesRejectedError``;
- 404 on a named read -> ``None``; 409 on a patch with a resourceVersion precondition -> ``None``.

Permissions used (the agent's ClusterRole must grant exactly these): nodes get/list/watch/patch; pods
get/list/watch/delete; pods/eviction create; apps daemonsets get; events create/patch; and, through a Role in
the agent's own namespace only, coordination.k8s.io leases get/create/update (leader election).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Generic, NoReturn, TypeVar, cast

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from core.exceptions import KubernetesApiError, KubernetesRejectedError
from core.model import parse_provider_id

log = logging.getLogger(__name__)

# The annotation that marks a cordon as this system's own (value: the id of the command that cordoned).
CORDON_ANNOTATION = "node-manager.aws/cordoned-by"
# Annotation the kubelet puts on the API-server copy of a static pod (a "mirror pod").
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
FIELD_MANAGER = "aws-node-manager"
MERGE_PATCH = "application/merge-patch+json"
DEFAULT_EVICTION_API_VERSION = "policy/v1"


# --------------------------------------------------------------------------------------------------- views


def _condition_true(conditions: list[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


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


# ----------------------------------------------------------------------------------------------- evictions


class EvictionStatus(str, Enum):
    """How the eviction subresource answered (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/)."""

    EVICTED = "evicted"  # 200/201: the pod is being deleted (gracefully)
    GONE = "gone"  # 404 (no such pod) or 409 on the uid precondition (the pod was replaced)
    BLOCKED = "blocked"  # 429: a PodDisruptionBudget (or API priority and fairness) says not now
    MULTIPLE_PDBS = "multiple_pdbs"  # 500 "more than one PodDisruptionBudget": the apiserver cannot decide
    ERROR = "error"  # anything else; see ``retryable``


@dataclass(frozen=True)
class EvictionResponse:
    """The outcome of one eviction request.

    Attributes:
        status: see ``EvictionStatus``.
        http_status: the HTTP status (0 for a connection failure).
        message: the apiserver's ``Status.message`` (or the connection error).
        pdb_name: for ``BLOCKED``, the disruption budget named in ``details.causes`` when the apiserver gives it.
        retryable: for ``ERROR``, whether trying again may help (5xx, connection); false for other 4xx.
    """

    status: EvictionStatus
    http_status: int = 0
    message: str = ""
    pdb_name: str | None = None
    retryable: bool = False


def _status_body(body: str | None) -> dict[str, Any]:
    if not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def blocking_pdb_name(status_body: Mapping[str, Any]) -> str | None:
    """The PodDisruptionBudget named in a 429 eviction answer, None if it names none.

    The apiserver's cause message reads ``The disruption budget <name> needs <n> healthy pods and has <m>
    currently`` (reason ``DisruptionBudget``; pkg/registry/core/pod/storage/eviction.go).
    """
    details = status_body.get("details") or {}
    for cause in details.get("causes") or []:
        if cause.get("reason") != "DisruptionBudget":
            continue
        words = str(cause.get("message", "")).split()
        if len(words) >= 4 and words[:3] == ["The", "disruption", "budget"]:
            return words[3]
    return None


def classify_eviction_error(http_status: int, body: str | None) -> EvictionResponse:
    """Map an eviction's error answer to an ``EvictionResponse`` (pure).

    404 -> GONE; 409 (uid precondition failed: the pod was deleted and recreated) -> GONE; 429 -> BLOCKED (with
    the PDB's name when given); 500 mentioning several PodDisruptionBudgets -> MULTIPLE_PDBS; other 5xx and 0
    (connection) -> retryable ERROR; other 4xx -> non-retryable ERROR.
    """
    status = _status_body(body)
    message = str(status.get("message") or body or "")
    if http_status == 404 or http_status == 409:
        return EvictionResponse(EvictionStatus.GONE, http_status, message)
    if http_status == 429:
        return EvictionResponse(EvictionStatus.BLOCKED, http_status, message, pdb_name=blocking_pdb_name(status))
    if (
        http_status == 500
        and "PodDisruptionBudget" in message
        and ("more than one" in message or "multiple" in message.lower())
    ):
        return EvictionResponse(EvictionStatus.MULTIPLE_PDBS, http_status, message)
    retryable = http_status == 0 or http_status >= 500
    return EvictionResponse(EvictionStatus.ERROR, http_status, message, retryable=retryable)


def eviction_api_version(resources: Sequence[Mapping[str, Any]]) -> str:
    """The group/version the apiserver serves for ``pods/eviction``, from the core/v1 discovery document.

    v1.20 answers ``policy/v1beta1`` (and rejects a ``policy/v1`` body with 400 "no kind Eviction is registered
    for version policy/v1"); v1.22+ answer ``policy/v1``. kubectl drain chooses the same way
    (``CheckEvictionSupport`` in k8s.io/kubectl/pkg/drain). Defaults to ``policy/v1`` when not listed.
    """
    for res in resources:
        if res.get("name") == "pods/eviction" and res.get("group") and res.get("version"):
            return f"{res['group']}/{res['version']}"
    return DEFAULT_EVICTION_API_VERSION


# ---------------------------------------------------------------------------------------------------- watch


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


E = TypeVar("E")


class _Watch(Generic[E]):
    """An open watch (a streaming list with ``watch=true``); iterate it for events; ``close()`` from any thread.

    The iteration ends when the apiserver closes the watch (its ``timeoutSeconds``) or ``close()`` is called.
    Iterating raises ``KubernetesApiError`` when the connection breaks otherwise.
    """

    def __init__(self, response: urllib3.HTTPResponse) -> None:
        self._response = response
        self._closed = threading.Event()

    def _event(self, kind: str, obj: Mapping[str, Any], rv: str | None) -> E:
        raise NotImplementedError

    def __iter__(self) -> Iterator[E]:
        try:
            for line in iter_resp_lines(self._response):  # type: ignore[no-untyped-call]
                if self._closed.is_set():
                    return
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                kind = str(event.get("type", ""))
                rv = None if kind == "ERROR" else (obj.get("metadata") or {}).get("resourceVersion")
                yield self._event(kind, obj, rv)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            if self._closed.is_set():
                return
            raise KubernetesApiError(f"watch broke: {err}") from err
        finally:
            self._release()

    def close(self) -> None:
        """Stop the watch; unblocks a thread waiting in ``__iter__`` (socket shutdown)."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._response.shutdown()
        except (ValueError, RuntimeError, OSError):
            pass

    def _release(self) -> None:
        try:
            self._response.close()
            self._response.release_conn()
        except (OSError, urllib3.exceptions.HTTPError):
            pass

    def __enter__(self) -> _Watch[E]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._release()


class PodWatch(_Watch[PodEvent]):
    """A watch on pods yielding ``PodEvent``s."""

    def _event(self, kind: str, obj: Mapping[str, Any], rv: str | None) -> PodEvent:
        if kind == "ERROR":
            return PodEvent(type=kind, code=obj.get("code"))
        pod = PodView.from_api(obj) if kind != "BOOKMARK" else None
        return PodEvent(type=kind, pod=pod, resource_version=rv)


class NodeWatch(_Watch[NodeEvent]):
    """A watch on nodes yielding ``NodeEvent``s."""

    def _event(self, kind: str, obj: Mapping[str, Any], rv: str | None) -> NodeEvent:
        if kind == "ERROR":
            return NodeEvent(type=kind, code=obj.get("code"))
        node = NodeView.from_api(obj) if kind != "BOOKMARK" else None
        return NodeEvent(type=kind, node=node, resource_version=rv)


# -------------------------------------------------------------------------------------------------- adapter


def make_api_client(configuration: client.Configuration, pool_maxsize: int = 40) -> client.ApiClient:
    """An ApiClient whose connection pool can serve ``pool_maxsize`` concurrent requests (parallel evictions
    plus a watch per drain); urllib3's default of 4 would serialize them.

    ``configuration`` comes from ``kubernetes.config.load_incluster_config`` / ``load_kube_config`` (given a
    ``client_configuration``) or is built by a test.
    """
    configuration.connection_pool_maxsize = pool_maxsize
    return client.ApiClient(configuration)


def _raise(err: Exception, what: str) -> NoReturn:
    """Raise the project's exception for a failed request (always ``from err``)."""
    if isinstance(err, ApiException):
        status = int(err.status or 0)
        message = str(_status_body(err.body).get("message") or err.reason or "")
        if status == 0 or status == 429 or status >= 500:
            raise KubernetesApiError(f"{what}: HTTP {status} {message}") from err
        raise KubernetesRejectedError(status, f"{what}: HTTP {status} {message}") from err
    raise KubernetesApiError(f"{what}: {err}") from err


_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


class KubeAdapter:
    """Typed, minimal access to the Kubernetes API for the drain engine and the Event recorder.

    Thread-safe (the underlying urllib3 pool is). Construct it in the entry point with ``make_api_client`` and
    pass it to whoever needs it.

    Args:
        api_client: an authenticated ``kubernetes.client.ApiClient``.
        request_timeout_seconds: per-request timeout (connect and read) for every non-watch request.
    """

    def __init__(self, api_client: client.ApiClient, request_timeout_seconds: float = 10.0) -> None:
        self._api = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._coordination = client.CoordinationV1Api(api_client)
        self._timeout = request_timeout_seconds
        self._eviction_version: str | None = None
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------------- nodes

    def get_node(self, name: str) -> NodeView | None:
        """The node called ``name``, None if there is none.

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        try:
            resp = self._api.read_node(name, _preload_content=False, _request_timeout=self._timeout)
        except ApiException as err:
            if err.status == 404:
                return None
            _raise(err, f"get node {name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"get node {name}")
        return NodeView.from_api(self._json(resp))

    def list_nodes(self) -> list[NodeView]:
        """Every node of the cluster.

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        return self.list_nodes_versioned()[0]

    def list_nodes_versioned(self) -> tuple[list[NodeView], str]:
        """Every node of the cluster and the list's resourceVersion (start ``watch_nodes`` there).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        try:
            resp = self._api.list_node(_preload_content=False, _request_timeout=self._timeout)
        except (ApiException, *_TRANSPORT_ERRORS) as err:
            _raise(err, "list nodes")
        body = self._json(resp)
        nodes = [NodeView.from_api(item) for item in body.get("items") or []]
        return nodes, str((body.get("metadata") or {}).get("resourceVersion", ""))

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> NodeWatch:
        """Open a watch on all nodes from ``resource_version``; the apiserver ends it after ``timeout_seconds``.

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        timeout_seconds = max(1, int(timeout_seconds))
        try:
            resp = self._api.list_node(
                watch=True,
                resource_version=resource_version or None,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=(self._timeout, timeout_seconds + self._timeout),
            )
        except (ApiException, *_TRANSPORT_ERRORS) as err:
            _raise(err, "watch nodes")
        return NodeWatch(cast(urllib3.HTTPResponse, resp))

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> NodeView | None:
        """Apply a JSON merge patch (RFC 7386) to a node; None when it lost a race.

        Put ``metadata.resourceVersion`` in ``patch`` to make it conditional: the apiserver answers 409 Conflict
        when the node changed since, and this returns None (read the node again and decide again).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx (404 included:
            the node vanished).
        """
        try:
            resp = self._api.patch_node(
                name,
                dict(patch),
                field_manager=FIELD_MANAGER,
                _content_type=MERGE_PATCH,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        except ApiException as err:
            if err.status == 409:
                return None
            _raise(err, f"patch node {name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"patch node {name}")
        return NodeView.from_api(self._json(resp))

    # ------------------------------------------------------------------------------------------------ pods

    def list_pods_on_node(self, node_name: str) -> tuple[list[PodView], str]:
        """The pods bound to ``node_name`` in every namespace (fieldSelector ``spec.nodeName``), and the list's
        resourceVersion (start a watch there to miss nothing).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        try:
            resp = self._api.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node_name}",
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        except (ApiException, *_TRANSPORT_ERRORS) as err:
            _raise(err, f"list pods on {node_name}")
        body = self._json(resp)
        pods = [PodView.from_api(item) for item in body.get("items") or []]
        return pods, str((body.get("metadata") or {}).get("resourceVersion", ""))

    def watch_pods_on_node(self, node_name: str, resource_version: str, timeout_seconds: int) -> PodWatch:
        """Open a watch on the pods of ``node_name`` from ``resource_version``; the apiserver ends it after
        ``timeout_seconds`` (>= 1).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        timeout_seconds = max(1, int(timeout_seconds))
        try:
            resp = self._api.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node_name}",
                watch=True,
                resource_version=resource_version or None,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=(self._timeout, timeout_seconds + self._timeout),
            )
        except (ApiException, *_TRANSPORT_ERRORS) as err:
            _raise(err, f"watch pods on {node_name}")
        return PodWatch(cast(urllib3.HTTPResponse, resp))

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        """POST an Eviction for the pod (the eviction subresource, which honours PodDisruptionBudgets).

        ``uid`` (when given) is sent as a precondition so a pod recreated under the same name is left alone
        (answer GONE). ``grace_period_seconds`` overrides the pod's own terminationGracePeriodSeconds. The
        body's apiVersion is what discovery says the apiserver serves (see ``eviction_api_version``).

        Never raises for an HTTP or connection error: the answer is classified in the returned value.
        """
        delete_options = None
        if uid is not None or grace_period_seconds is not None:
            delete_options = client.V1DeleteOptions(
                grace_period_seconds=grace_period_seconds,
                preconditions=client.V1Preconditions(uid=uid) if uid else None,
            )
        body = client.V1Eviction(
            api_version=self.eviction_api_version(),
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=delete_options,
        )
        try:
            resp = self._api.create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as err:
            return classify_eviction_error(int(err.status or 0), err.body)
        except _TRANSPORT_ERRORS as err:
            return EvictionResponse(EvictionStatus.ERROR, 0, str(err), retryable=True)
        return EvictionResponse(EvictionStatus.EVICTED, self._drain_response(resp))

    def delete_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> bool:
        """DELETE a pod (used for finished pods, which no budget protects); False when it was already gone.

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        body = client.V1DeleteOptions(
            grace_period_seconds=grace_period_seconds,
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
        )
        try:
            resp = self._api.delete_namespaced_pod(
                name, namespace, body=body, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as err:
            if err.status in (404, 409):
                return False
            _raise(err, f"delete pod {namespace}/{name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"delete pod {namespace}/{name}")
        self._drain_response(resp)
        return True

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether the DaemonSet ``namespace/name`` exists (apps/v1); a pod of a deleted DaemonSet is an orphan.

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        try:
            resp = self._apps.read_namespaced_daemon_set(
                name, namespace, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as err:
            if err.status == 404:
                return False
            _raise(err, f"get daemonset {namespace}/{name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"get daemonset {namespace}/{name}")
        self._drain_response(resp)
        return True

    def eviction_api_version(self) -> str:
        """``policy/v1`` or ``policy/v1beta1``, from core/v1 discovery (asked once, then cached)."""
        with self._lock:
            if self._eviction_version is None:
                try:
                    resp = self._api.get_api_resources(_preload_content=False, _request_timeout=self._timeout)
                    resources = self._json(resp).get("resources") or []
                    self._eviction_version = eviction_api_version(resources)
                except (ApiException, *_TRANSPORT_ERRORS) as err:
                    log.warning("discovery of pods/eviction failed (%s); using %s", err, DEFAULT_EVICTION_API_VERSION)
                    return DEFAULT_EVICTION_API_VERSION
            return self._eviction_version

    # ---------------------------------------------------------------------------------------------- events

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        """Create a core/v1 Event (``event`` as JSON, camelCase).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        try:
            body = client.CoreV1Event.from_dict(dict(event))
            if body is None:
                raise KubernetesRejectedError(400, f"not an Event: {event!r}")
            resp = self._api.create_namespaced_event(
                namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
        except (ApiException, *_TRANSPORT_ERRORS) as err:
            _raise(err, f"create event in {namespace}")
        self._drain_response(resp)

    # ---------------------------------------------------------------------------------------------- leases

    def get_lease(self, namespace: str, name: str) -> LeaseView | None:
        """The Lease ``namespace/name``, None if there is none.

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx (403: the agent's
            Role in ``namespace`` lacks ``leases get``).
        """
        try:
            resp = self._coordination.read_namespaced_lease(
                name, namespace, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as err:
            if err.status == 404:
                return None
            _raise(err, f"get lease {namespace}/{name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"get lease {namespace}/{name}")
        return LeaseView.from_api(self._json(resp))

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any]) -> LeaseView | None:
        """Create the Lease with ``spec`` (JSON, camelCase); None when it already exists (409: someone else
        created it first; read it again).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": dict(spec),
        }
        try:
            resp = self._coordination.create_namespaced_lease(
                namespace, body, field_manager=FIELD_MANAGER, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as err:
            if err.status == 409:
                return None
            _raise(err, f"create lease {namespace}/{name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"create lease {namespace}/{name}")
        return LeaseView.from_api(self._json(resp))

    def replace_lease(
        self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str
    ) -> LeaseView | None:
        """Replace the Lease's spec if it is still at ``resource_version``; None when it is not (409 Conflict:
        another candidate wrote it since it was read), or when it was deleted meanwhile (404).

        Raises:
            KubernetesApiError: 5xx or connection failure. KubernetesRejectedError: other 4xx.
        """
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
            "spec": dict(spec),
        }
        try:
            resp = self._coordination.replace_namespaced_lease(
                name,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        except ApiException as err:
            if err.status in (404, 409):
                return None
            _raise(err, f"update lease {namespace}/{name}")
        except _TRANSPORT_ERRORS as err:
            _raise(err, f"update lease {namespace}/{name}")
        return LeaseView.from_api(self._json(resp))

    # --------------------------------------------------------------------------------------------- helpers

    # With ``_preload_content=False`` the generated methods return the raw urllib3 response (their annotations
    # name the model they would have built), hence ``Any`` below.

    @staticmethod
    def _json(resp: Any) -> dict[str, Any]:
        try:
            data = resp.data
        finally:
            resp.release_conn()
        parsed = json.loads(data) if data else {}
        return parsed if isinstance(parsed, dict) else {}

    @staticmethod
    def _drain_response(resp: Any) -> int:
        """Read and release a response; its HTTP status."""
        try:
            _ = resp.data
        finally:
            resp.release_conn()
        return int(resp.status)
