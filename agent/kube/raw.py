"""The few Kubernetes API calls the agent makes, sent through ``ApiClient`` without the generated API classes.

The kubernetes client (v37) loads each generated API class on first use: ``CoreV1Api`` alone is about 20 MiB of
code once loaded (measured: RSS 55 -> 76 MiB on ``CoreV1Api(api_client)``), ``AppsV1Api`` and
``CoordinationV1Api`` 4 MiB more, for the dozen calls below. ``RawApi`` offers those calls under the generated
methods' names and arguments (so ``KubeAdapter`` reads the same), built with the client's own
``ApiClient.param_serialize`` (paths, query encoding, bearer-token auth, body serialization) and ``call_api``.

Every method is called with ``_preload_content=False`` and returns the raw ``urllib3`` response; an answer outside
2xx raises ``ApiException`` as the generated methods do (``agent.kube.errors.kube_error`` maps it). Paths and
query parameter names: the Kubernetes API reference (core/v1 Node, Pod, Eviction, Event; apps/v1 DaemonSet;
coordination.k8s.io/v1 Lease).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

JSON = "application/json"
QUERY_NAMES = {  # keyword of the generated methods -> query parameter of the API
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "limit": "limit",
    "_continue": "continue",
    "field_selector": "fieldSelector",
    "label_selector": "labelSelector",
    "field_manager": "fieldManager",
}
NODES = "/api/v1/nodes"
NAMESPACED = "/api/v1/namespaces/{namespace}"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class RawApi:
    """The agent's calls (``KubeAdapter`` uses one for its core, apps and coordination calls).

    Args:
        api_client: an authenticated ``kubernetes.client.ApiClient``.
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    # core/v1 nodes
    def read_node(self, name: str, **options: Any) -> Any:
        return self._call("GET", f"{NODES}/{{name}}", {"name": name}, **options)

    def list_node(self, **options: Any) -> Any:
        return self._call("GET", NODES, {}, **options)

    def patch_node(self, name: str, body: Any, _content_type: str = JSON, **options: Any) -> Any:
        return self._call("PATCH", f"{NODES}/{{name}}", {"name": name}, body, _content_type, **options)

    # core/v1 pods, evictions, events, discovery
    def list_pod_for_all_namespaces(self, **options: Any) -> Any:
        return self._call("GET", "/api/v1/pods", {}, **options)

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any, **options: Any) -> Any:
        path = f"{NAMESPACED}/pods/{{name}}/eviction"
        return self._call("POST", path, {"name": name, "namespace": namespace}, body, **options)

    def delete_namespaced_pod(self, name: str, namespace: str, body: Any = None, **options: Any) -> Any:
        path = f"{NAMESPACED}/pods/{{name}}"
        return self._call("DELETE", path, {"name": name, "namespace": namespace}, body, **options)

    def create_namespaced_event(self, namespace: str, body: Any, **options: Any) -> Any:
        return self._call("POST", f"{NAMESPACED}/events", {"namespace": namespace}, body, **options)

    def get_api_resources(self, **options: Any) -> Any:
        return self._call("GET", "/api/v1/", {}, **options)

    # apps/v1
    def read_namespaced_daemon_set(self, name: str, namespace: str, **options: Any) -> Any:
        path = "/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"
        return self._call("GET", path, {"name": name, "namespace": namespace}, **options)

    # coordination.k8s.io/v1
    def read_namespaced_lease(self, name: str, namespace: str, **options: Any) -> Any:
        return self._call("GET", f"{LEASES}/{{name}}", {"name": name, "namespace": namespace}, **options)

    def create_namespaced_lease(self, namespace: str, body: Any, **options: Any) -> Any:
        return self._call("POST", LEASES, {"namespace": namespace}, body, **options)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any, **options: Any) -> Any:
        return self._call("PUT", f"{LEASES}/{{name}}", {"name": name, "namespace": namespace}, body, **options)

    def _call(
        self,
        method: str,
        path: str,
        path_params: Mapping[str, str],
        body: Any = None,
        content_type: str = JSON,
        _preload_content: bool = False,
        _request_timeout: Any = None,
        **query: Any,
    ) -> Any:
        """Send one request; the raw ``urllib3`` response (``_preload_content`` must be False: nothing here
        decodes into models). Raises ``ApiException`` for an answer outside 2xx, urllib3/OS errors for transport."""
        if _preload_content:
            raise ValueError("RawApi returns raw responses only (_preload_content=False)")
        unknown = set(query) - set(QUERY_NAMES)
        if unknown:
            raise TypeError(f"unknown query options {sorted(unknown)}")
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        params = [(QUERY_NAMES[key], value) for key, value in query.items() if value is not None]
        request = self.api_client.param_serialize(
            method,
            path,
            path_params=dict(path_params),
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(*request, _request_timeout=_request_timeout)
        if not 200 <= response.status <= 299:
            response.read()  # type: ignore[no-untyped-call]  # the kubernetes client has no annotations
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response
