"""The raw calls: the request each one builds through the client's own ``param_serialize`` (path, query names as
the API spells them, bearer auth, body), and non-2xx answers raised as the generated methods raise them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agent.kube.raw import RawApi


class Answer:
    def __init__(self, status: int, body: bytes = b"{}") -> None:
        self.status = status
        self.data = body
        self.reason = "r"
        self.headers: dict[str, str] = {}
        self.response = self

    def read(self) -> bytes:
        return self.data

    def getheaders(self) -> dict[str, str]:
        return {}


class Recording(client.ApiClient):
    def __init__(self, status: int = 200) -> None:
        configuration = client.Configuration(host="https://kube.example")
        configuration.api_key = {"BearerToken": "t0k"}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        super().__init__(configuration)
        self.sent: list[tuple[Any, ...]] = []
        self.status = status

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> Any:  # fmt: skip
        self.sent.append((method, url, header_params, body, _request_timeout))
        return Answer(self.status, b'{"kind":"Status","code":409,"message":"conflict"}')


def test_a_paged_node_list_sends_limit_and_continue_as_the_api_names_them() -> None:
    api = Recording()
    answer = RawApi(api).list_node(limit=500, _continue="abc", _preload_content=False, _request_timeout=3)
    [(method, url, headers, body, timeout)] = api.sent
    assert method == "GET" and body is None and timeout == 3
    assert url == "https://kube.example/api/v1/nodes?limit=500&continue=abc"
    assert headers["authorization"] == "Bearer t0k" and headers["Accept"] == "application/json"
    assert isinstance(answer, Answer)


def test_a_watch_and_a_merge_patch() -> None:
    api = Recording()
    raw = RawApi(api)
    raw.list_node(watch=True, resource_version="7", allow_watch_bookmarks=True, timeout_seconds=30)
    raw.patch_node(
        "n1", {"spec": {"unschedulable": True}}, field_manager="m", _content_type="application/merge-patch+json"
    )
    (_, watch_url, *_), (method, patch_url, headers, body, _) = api.sent
    assert watch_url.endswith("/api/v1/nodes?watch=true&resourceVersion=7&allowWatchBookmarks=true&timeoutSeconds=30")
    assert method == "PATCH" and patch_url.endswith("/api/v1/nodes/n1?fieldManager=m")
    assert headers["Content-Type"] == "application/merge-patch+json" and body == {"spec": {"unschedulable": True}}


def test_an_answer_outside_2xx_raises_api_exception_with_its_status() -> None:
    with pytest.raises(ApiException) as info:
        RawApi(Recording(status=409)).read_namespaced_lease("leader", "node-manager")
    assert info.value.status == 409


def test_unknown_options_and_preloaded_content_are_refused() -> None:
    with pytest.raises(TypeError):
        RawApi(Recording()).list_node(pretty="true")
    with pytest.raises(ValueError):
        RawApi(Recording()).read_node("n1", _preload_content=True)
