"""Node reads of ``KubeAdapter``: paged lists, the node watch, and finding an instance's node through the adapter's
``NodeIndex`` (a mixin: the calls go through ``KubeAdapter._send``; see ``agent.kube.client`` for the errors).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import urllib3

from agent.kube.nodeindex import NodeIndex
from agent.kube.raw import RawApi
from agent.kube.views import NodeView
from agent.kube.watch import NodeWatch

NODE_PAGE_SIZE = 500  # nodes per list page: about 1.6 MB of JSON at 3 KB a node, instead of the whole cluster at once


class NodeReads:
    """Node reads; ``KubeAdapter`` provides the transport (``_send``, ``_json``) and ``get_node``."""

    node_page_size: int
    node_index: NodeIndex
    _api: RawApi
    _timeout: float

    def _send(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def _json(resp: Any) -> dict[str, Any]:
        raise NotImplementedError

    def get_node(self, name: str) -> NodeView | None:
        raise NotImplementedError

    def list_nodes(self) -> list[NodeView]:
        """Every node of the cluster (read a page at a time, see ``list_node_pages``)."""
        return self.list_nodes_versioned()[0]

    def list_nodes_versioned(self) -> tuple[list[NodeView], str]:
        """Every node of the cluster and the list's resourceVersion (start ``watch_nodes`` there)."""
        nodes: list[NodeView] = []
        resource_version = ""
        for page, page_version in self.list_node_pages():
            nodes.extend(page)
            resource_version = page_version
        return nodes, resource_version

    def list_node_pages(self, page_size: int | None = None) -> Iterator[tuple[list[NodeView], str]]:
        """Every node of the cluster, ``page_size`` (default ``node_page_size``) at a time: the list's ``limit``
        and ``continue`` (Kubernetes API concepts, "Retrieving large results sets in chunks"); all pages are one
        consistent snapshot, whose resourceVersion each page carries (start ``watch_nodes`` there).

        Each node seen feeds ``node_index``. Raises ``KubernetesRejectedError`` (410) when the continue token
        expired between two pages (list again from the start); others as in the class docstring.
        """
        limit = page_size or self.node_page_size
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": limit}
            if token:
                kwargs["_continue"] = token
            body = self._json(self._send("list nodes", self._api.list_node, **kwargs))
            meta = body.get("metadata") or {}
            nodes = [NodeView.from_api(item) for item in body.get("items") or []]
            del body  # one page of parsed JSON at a time
            for node in nodes:
                self.node_index.saw(node)
            yield nodes, str(meta.get("resourceVersion", ""))
            token = meta.get("continue") or None
            if token is None:
                return

    def node_for_instance(self, instance_id: str, scan: bool = True) -> NodeView | None:
        """The node whose ``spec.providerID`` names ``instance_id``, None when there is none: the node named by
        ``node_index`` (one GET, its providerID checked), else (``scan``) a paged scan of the nodes
        (``list_node_pages``) that stops at the first match; without ``scan`` the index alone answers (a frequent
        probe: the node watch feeds the index as nodes register)."""
        name = self.node_index.name(instance_id)
        if name is not None:
            node = self.get_node(name)
            if node is not None and node.instance_id == instance_id:
                return node
        if not scan:
            return None
        for page, _ in self.list_node_pages():
            for node in page:
                if node.instance_id == instance_id:
                    return node
        return None

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> NodeWatch:
        """Open a watch on all nodes from ``resource_version``; the apiserver ends it after ``timeout_seconds``.
        Each event's node feeds ``node_index``."""
        timeout_seconds = max(1, int(timeout_seconds))
        resp = self._send(
            "watch nodes",
            self._api.list_node,
            watch=True,
            resource_version=resource_version or None,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=(self._timeout, timeout_seconds + self._timeout),
        )
        return NodeWatch(cast(urllib3.HTTPResponse, resp), on_event=self.node_index.saw_event)
