"""Open watches on pods and nodes: a streaming list (``watch=true``) read line by line into typed events.

``KubeAdapter.watch_pods_on_node`` and ``KubeAdapter.watch_nodes`` open them; iterating yields ``PodEvent`` /
``NodeEvent`` (``agent.kube.views``). ERROR events carry the Status code (410: the resourceVersion is too old).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import urllib3
from kubernetes.watch.watch import iter_resp_lines

from agent.kube.views import NodeEvent, NodeView, PodEvent, PodView
from core.exceptions import KubernetesApiError

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
            for line in iter_resp_lines(self._response):  # type: ignore[no-untyped-call]  # kubernetes: no annotations
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
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self._response.shutdown()

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
    """A watch on nodes yielding ``NodeEvent``s; ``on_event`` (when given) sees each event first (the adapter's
    ``NodeIndex``) and must not raise."""

    def __init__(self, response: urllib3.HTTPResponse, on_event: Callable[[NodeEvent], None] | None = None) -> None:
        super().__init__(response)
        self._on_event = on_event

    def _event(self, kind: str, obj: Mapping[str, Any], rv: str | None) -> NodeEvent:
        if kind == "ERROR":
            return NodeEvent(type=kind, code=obj.get("code"))
        node = NodeView.from_api(obj) if kind != "BOOKMARK" else None
        event = NodeEvent(type=kind, node=node, resource_version=rv)
        if self._on_event is not None:
            self._on_event(event)
        return event
