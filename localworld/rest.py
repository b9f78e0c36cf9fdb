"""A thin JSON-dict layer over ``kubernetes.client.ApiClient`` for the local world.

The simulator and the world's helpers handle many objects quickly, so they work on plain dicts parsed from the API's
JSON instead of the client's model classes (which are slow to build), and they reach APIs the Python client no longer
ships (``policy/v1beta1`` PodDisruptionBudgets, the only PDB version kube-apiserver v1.20 serves).

Errors are the client's own ``kubernetes.client.exceptions.ApiException`` (``.status``, ``.reason``, ``.body``), so
callers handle them the same way as errors from the generated API classes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def q(value: str) -> str:
    """Quote one path segment (a namespace or an object name)."""
    return quote(value, safe="")


class KubeRest:
    """Raw JSON requests through an ``ApiClient`` (its host, TLS settings, token and connection pool).

    Args:
        api: a configured ``kubernetes.client.ApiClient``.
        timeout: per-request timeout in seconds (connect and read).
    """

    def __init__(self, api: ApiClient, timeout: float = 30.0) -> None:
        self.api = api
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> JSON:
        """Send one request and return the decoded JSON answer ({} when empty).

        Raises:
            ApiException: any non-2xx answer (status and body as the server sent them), or status 0 on TLS errors.
        """
        resp = self._send(method, path, body=body, params=params, content_type=content_type, timeout=timeout)
        try:
            data = resp.read()
        finally:
            resp.response.release_conn()
        if not 200 <= resp.status <= 299:
            raise ApiException(status=resp.status, reason=resp.reason, body=data.decode("utf-8", "replace"))
        return json.loads(data) if data else {}

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        query = [(k, v) for k, v in (params or {}).items() if v is not None]
        method_, url, header_params, body_, post_params = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return self.api.call_api(
            method_,
            url,
            header_params=header_params,
            body=body_,
            post_params=post_params,
            _request_timeout=timeout if timeout is not None else (self.timeout, self.timeout),
        )

    def get(self, path: str, **params: Any) -> JSON:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any) -> JSON:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Any) -> JSON:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> JSON:
        return self.request("PATCH", path, body=body, content_type=content_type)

    def delete(self, path: str, grace_period_seconds: int | None = None, **params: Any) -> JSON:
        body = None
        if grace_period_seconds is not None:
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace_period_seconds}
        return self.request("DELETE", path, body=body, params=params)

    def delete_quiet(self, path: str, grace_period_seconds: int | None = None) -> bool:
        """DELETE that treats 404 (already gone) as success. Returns False when it was already gone."""
        try:
            self.delete(path, grace_period_seconds=grace_period_seconds)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def watch_lines(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = 60,
        read_timeout: float = 75.0,
        on_open: Callable[[Any], None] | None = None,
    ) -> Iterator[JSON]:
        """Watch ``path`` from ``resource_version``; yields watch events ``{"type": ..., "object": {...}}``.

        Ends when the server closes the watch (after ``timeout_seconds``). The caller re-lists on an ``ERROR`` event
        with code 410 (resource version too old). ``on_open`` receives the open ``urllib3.HTTPResponse`` so another
        thread can end the watch early (``response.shutdown()``).

        Raises:
            ApiException: the watch request was refused.
        """
        resp = self._send(
            "GET",
            path,
            params={
                "watch": "true",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": timeout_seconds,
            },
            timeout=(self.timeout, read_timeout),
        )
        raw = resp.response
        if on_open is not None:
            on_open(raw)
        done = False
        try:
            if not 200 <= resp.status <= 299:
                data = raw.read()
                raise ApiException(status=resp.status, reason=resp.reason, body=data.decode("utf-8", "replace"))
            buf = b""
            for chunk in raw.stream(65536, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            done = True
        finally:
            if not done:
                raw.close()  # an unfinished stream must not go back to the pool
            raw.release_conn()
