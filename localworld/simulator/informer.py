"""One resource's cache for the simulator: list + watch into a dict keyed ``namespace/name``.

The simulator's own writes go into the cache at once (``apply``/``remove``); a newer resourceVersion wins and a
tombstone keeps a late watch event from bringing a deleted object back, so a reconcile pass never acts twice on the
same fact.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from localworld.rest import JSON, KubeRest
from localworld.simulator.objects import KINDS, PATHS, key_of, resource_version

log = logging.getLogger(__name__)


class Informer:
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
        rv = resource_version(obj)
        with self.lock:
            current = self.items.get(key)
            if current is not None and resource_version(current) > rv:
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
            self._tombstones[key] = max(resource_version(obj), self._tombstones.get(key, 0))
            if len(self._tombstones) > 5000:
                for old in list(self._tombstones)[:2500]:
                    self._tombstones.pop(old, None)

    def close(self) -> None:
        resp = self._resp
        if resp is not None:
            # best effort interruption of a blocking read: the response may be closed already
            with contextlib.suppress(Exception):
                resp.shutdown()

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
