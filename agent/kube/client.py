"""The agent's only door to the Kubernetes API: nodes, pods, evictions, pod and node watches, Events, Leases.

Everything else in the agent works on the small read-only views of ``agent.kube.views`` and on the typed outcomes
these methods return; the ``agent.kube`` package is the only part of the agent that imports ``kubernetes``.

Reads are done with ``_preload_content=False`` and parsed straight from the JSON the apiserver sends (the
generated pydantic models are slow to build for every pod of a node and of every watch event).

Errors map to ``core.exceptions`` in one place, ``agent.kube.errors.kube_error``; here 404 on a named read ->
``None``, 409 on a patch with a resourceVersion precondition -> ``None``.

Permissions used (the agent's ClusterRole must grant exactly these): nodes get/list/watch/patch; pods
get/list/watch/delete; pods/eviction create; apps daemonsets get; events create/patch; and, through a Role in
the agent's own namespace only, coordination.k8s.io leases get/create/update (leader election).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from agent.kube.errors import API_ERRORS, TRANSPORT_ERRORS, kube_error
from agent.kube.eviction import (
    DEFAULT_EVICTION_API_VERSION,
    EvictionResponse,
    EvictionStatus,
    classify_eviction_error,
    eviction_api_version,
)
from agent.kube.nodeindex import NodeIndex
from agent.kube.nodes import NODE_PAGE_SIZE, NodeReads
from agent.kube.ratelimit import TokenBucket
from agent.kube.raw import RawApi
from agent.kube.views import LeaseView, NodeView, PodView
from agent.kube.watch import PodWatch
from core.exceptions import (
    KubernetesConflictError,
    KubernetesNotFoundError,
    KubernetesRejectedError,
    SettingsError,
)

log = logging.getLogger(__name__)

FIELD_MANAGER = "aws-node-manager"
MERGE_PATCH = "application/merge-patch+json"


def kube_configuration(environ: Mapping[str, str]) -> client.Configuration:
    """The Kubernetes client configuration: the file named by ``KUBECONFIG`` if set, else in-cluster (the pod's
    service account).

    Raises:
        SettingsError: the kubeconfig cannot be loaded, or the process is not in a pod.
    """
    configuration = client.Configuration()
    path = environ.get("KUBECONFIG")
    try:
        if path:
            config.load_kube_config(  # type: ignore[no-untyped-call]  # the kubernetes client has no annotations
                config_file=path, client_configuration=configuration
            )
        else:
            config.load_incluster_config(  # type: ignore[no-untyped-call]  # the kubernetes client has no annotations
                client_configuration=configuration
            )
    except (config.ConfigException, OSError) as err:
        raise SettingsError("KUBECONFIG", f"cannot load the Kubernetes configuration: {err}") from err
    return configuration


def make_api_client(configuration: client.Configuration, pool_maxsize: int = 40) -> client.ApiClient:
    """An ApiClient whose connection pool can serve ``pool_maxsize`` concurrent requests (parallel evictions
    plus a watch per drain); urllib3's default of 4 would serialize them.

    ``configuration`` comes from ``kubernetes.config.load_incluster_config`` / ``load_kube_config`` (given a
    ``client_configuration``) or is built by a test.
    """
    configuration.connection_pool_maxsize = pool_maxsize
    return client.ApiClient(configuration)


class KubeAdapter(NodeReads):
    """Typed, minimal access to the Kubernetes API for the drain engine, the Event recorder, the membership
    reporter and leader election.

    Thread-safe (the underlying urllib3 pool is). Construct it in the entry point with ``make_api_client`` and
    pass it to whoever needs it.

    Every method that raises raises what ``agent.kube.errors.kube_error`` maps: ``KubernetesApiError`` (5xx,
    429, connection failure; retryable) or ``KubernetesRejectedError`` (other 4xx), unless it says otherwise.

    Args:
        api_client: an authenticated ``kubernetes.client.ApiClient``.
        request_timeout_seconds: per-request timeout (connect and read) for every non-watch request.
        limiter: the client-side request rate limit (``agent.kube.ratelimit.TokenBucket``; ``AGENT_KUBE_QPS`` /
            ``AGENT_KUBE_BURST``) every request (watch starts included) takes a token from; the node reads and
            patches that cordon and the leader Lease are urgent (served before waiting evictions). None: no limit.
        node_page_size: nodes per page of a node list (``limit``).

    Attributes:
        node_index: instance id -> node name of every node a list page or the node watch showed (a light cache:
            two strings a node), which ``node_for_instance`` asks before listing.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        request_timeout_seconds: float = 10.0,
        limiter: TokenBucket | None = None,
        node_page_size: int = NODE_PAGE_SIZE,
    ) -> None:
        self.node_page_size = node_page_size
        self.node_index = NodeIndex()
        self._api = RawApi(api_client)  # not the generated CoreV1Api & co.: 24 MiB of code (agent/kube/raw.py)
        self._apps = self._api
        self._coordination = self._api
        self._timeout = request_timeout_seconds
        self._eviction_version: str | None = None
        self._lock = threading.Lock()
        self.limiter = limiter

    # ----------------------------------------------------------------------------------------------- nodes

    def get_node(self, name: str) -> NodeView | None:
        """The node called ``name``, None if there is none."""
        try:
            return NodeView.from_api(self._json(self._send(f"get node {name}", self._api.read_node, name, urgent=True)))
        except KubernetesNotFoundError:
            return None

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> NodeView | None:
        """Apply a JSON merge patch (RFC 7386) to a node; None when it lost a race.

        Put ``metadata.resourceVersion`` in ``patch`` to make it conditional: the apiserver answers 409 Conflict
        when the node changed since, and this returns None (read the node again and decide again).

        Raises:
            KubernetesNotFoundError: the node vanished. Others: see the class docstring.
        """
        try:
            resp = self._send(
                f"patch node {name}",
                self._api.patch_node,
                name,
                dict(patch),
                field_manager=FIELD_MANAGER,
                _content_type=MERGE_PATCH,
                urgent=True,
            )
        except KubernetesConflictError:
            return None
        return NodeView.from_api(self._json(resp))

    # ------------------------------------------------------------------------------------------------ pods

    def list_pods_on_node(self, node_name: str) -> tuple[list[PodView], str]:
        """The pods bound to ``node_name`` in every namespace (fieldSelector ``spec.nodeName``), and the list's
        resourceVersion (start a watch there to miss nothing)."""
        resp = self._send(
            f"list pods on {node_name}",
            self._api.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={node_name}",
        )
        body = self._json(resp)
        pods = [PodView.from_api(item) for item in body.get("items") or []]
        return pods, str((body.get("metadata") or {}).get("resourceVersion", ""))

    def watch_pods_on_node(self, node_name: str, resource_version: str, timeout_seconds: int) -> PodWatch:
        """Open a watch on the pods of ``node_name`` from ``resource_version``; the apiserver ends it after
        ``timeout_seconds`` (>= 1)."""
        timeout_seconds = max(1, int(timeout_seconds))
        resp = self._send(
            f"watch pods on {node_name}",
            self._api.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={node_name}",
            watch=True,
            resource_version=resource_version or None,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=(self._timeout, timeout_seconds + self._timeout),
        )
        return PodWatch(cast(urllib3.HTTPResponse, resp))

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        """POST an Eviction for the pod (the eviction subresource, which honours PodDisruptionBudgets).

        ``uid`` (when given) is sent as a precondition so a pod recreated under the same name is left alone
        (answer GONE). ``grace_period_seconds`` overrides the pod's own terminationGracePeriodSeconds. The
        body's apiVersion is what discovery says the apiserver serves (see ``eviction_api_version``).

        Never raises for an HTTP or connection error: the answer is classified in the returned value
        (``agent.kube.eviction.classify_eviction_error``).
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
        self._throttle(urgent=False)
        try:
            resp = self._api.create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as err:
            return classify_eviction_error(int(err.status or 0), err.body)
        except TRANSPORT_ERRORS as err:
            return EvictionResponse(EvictionStatus.ERROR, 0, str(err), retryable=True)
        return EvictionResponse(EvictionStatus.EVICTED, self._drain_response(resp))

    def delete_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> bool:
        """DELETE a pod (used for finished pods, which no budget protects); False when it was already gone
        (404, or 409: the uid precondition failed because the pod was replaced)."""
        body = client.V1DeleteOptions(
            grace_period_seconds=grace_period_seconds,
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
        )
        try:
            resp = self._send(
                f"delete pod {namespace}/{name}", self._api.delete_namespaced_pod, name, namespace, body=body
            )
        except (KubernetesNotFoundError, KubernetesConflictError):
            return False
        self._drain_response(resp)
        return True

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether the DaemonSet ``namespace/name`` exists (apps/v1); a pod of a deleted DaemonSet is an orphan."""
        try:
            resp = self._send(
                f"get daemonset {namespace}/{name}", self._apps.read_namespaced_daemon_set, name, namespace
            )
        except KubernetesNotFoundError:
            return False
        self._drain_response(resp)
        return True

    def eviction_api_version(self) -> str:
        """``policy/v1`` or ``policy/v1beta1``, from core/v1 discovery (asked once, then cached)."""
        with self._lock:
            if self._eviction_version is None:
                self._throttle(urgent=False)
                try:
                    resp = self._api.get_api_resources(_preload_content=False, _request_timeout=self._timeout)
                    resources = self._json(resp).get("resources") or []
                    self._eviction_version = eviction_api_version(resources)
                except API_ERRORS as err:
                    log.warning("discovery of pods/eviction failed (%s); using %s", err, DEFAULT_EVICTION_API_VERSION)
                    return DEFAULT_EVICTION_API_VERSION
            return self._eviction_version

    # ---------------------------------------------------------------------------------------------- events

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        """Create a core/v1 Event (``event`` as JSON, camelCase)."""
        body = client.CoreV1Event.from_dict(dict(event))
        if body is None:
            raise KubernetesRejectedError(400, f"not an Event: {event!r}")
        resp = self._send(f"create event in {namespace}", self._api.create_namespaced_event, namespace, body)
        self._drain_response(resp)

    # ---------------------------------------------------------------------------------------------- leases

    def get_lease(self, namespace: str, name: str) -> LeaseView | None:
        """The Lease ``namespace/name``, None if there is none.

        Raises:
            KubernetesRejectedError: 403 when the agent's Role in ``namespace`` lacks ``leases get``.
        """
        what = f"get lease {namespace}/{name}"
        try:
            return LeaseView.from_api(
                self._json(self._send(what, self._coordination.read_namespaced_lease, name, namespace, urgent=True))
            )
        except KubernetesNotFoundError:
            return None

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any]) -> LeaseView | None:
        """Create the Lease with ``spec`` (JSON, camelCase); None when it already exists (409: someone else
        created it first; read it again)."""
        body = _lease_body(namespace, name, spec)
        try:
            resp = self._send(
                f"create lease {namespace}/{name}",
                self._coordination.create_namespaced_lease,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                urgent=True,
            )
        except KubernetesConflictError:
            return None
        return LeaseView.from_api(self._json(resp))

    def replace_lease(
        self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str
    ) -> LeaseView | None:
        """Replace the Lease's spec if it is still at ``resource_version``; None when it is not (409 Conflict:
        another candidate wrote it since it was read), or when it was deleted meanwhile (404)."""
        body = _lease_body(namespace, name, spec, resource_version)
        try:
            resp = self._send(
                f"update lease {namespace}/{name}",
                self._coordination.replace_namespaced_lease,
                name,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                urgent=True,
            )
        except (KubernetesNotFoundError, KubernetesConflictError):
            return None
        return LeaseView.from_api(self._json(resp))

    # --------------------------------------------------------------------------------------------- helpers

    # With ``_preload_content=False`` the generated methods return the raw urllib3 response (their annotations
    # name the model they would have built), hence ``Any`` below.

    def _throttle(self, urgent: bool) -> None:
        if self.limiter is not None:
            self.limiter.acquire(urgent=urgent)

    def _send(self, what: str, call: Callable[..., Any], *args: Any, urgent: bool = False, **kwargs: Any) -> Any:
        """Call a generated API method for its raw response (``_preload_content=False``; the per-request timeout
        unless ``_request_timeout`` is given), after taking a token of the rate limit (``urgent``: before normal
        requests). Raises ``kube_error(err, what)`` from any failure."""
        self._throttle(urgent)
        kwargs.setdefault("_request_timeout", self._timeout)
        try:
            return call(*args, _preload_content=False, **kwargs)
        except API_ERRORS as err:
            raise kube_error(err, what) from err

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


def _lease_body(
    namespace: str, name: str, spec: Mapping[str, Any], resource_version: str | None = None
) -> dict[str, Any]:
    """A ``coordination.k8s.io/v1`` Lease as JSON; ``resource_version`` (when given) makes a replace conditional."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": dict(spec)}
