"""The drain's eyes: a watch on the node's pods feeding the drain's inbox, on its own thread.

The watch is re-opened when the apiserver ends it, and the pods re-listed (a "snapshot") after an error or a
410 Gone, until the drain stops it or its deadline passes. Messages put on the inbox: ``("snapshot", pods)``,
``("event", PodEvent)``, ``("watch_error", str)``.
"""

from __future__ import annotations

import contextvars
import logging
import math
import queue
import threading
from typing import Any

from agent.drain.ports import PodLister
from core.clock import Clock, Deadline
from core.exceptions import NodeManagerError

log = logging.getLogger(__name__)

MAX_WATCH_SECONDS = 300


class PodWatcher:
    """Feeds the drain's inbox from a watch on the node's pods, re-opening it when the apiserver ends it and
    re-listing (a snapshot) after an error or a 410 Gone. Runs on its own daemon thread until ``stop()`` or the
    deadline."""

    def __init__(
        self,
        kube: PodLister,
        node_name: str,
        resource_version: str,
        deadline: Deadline,
        inbox: queue.Queue[tuple[str, Any]],
        stop_event: threading.Event,
        clock: Clock,
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.resource_version = resource_version
        self.deadline = deadline
        self.inbox = inbox
        self.stop_event = stop_event
        self.clock = clock
        self._lock = threading.Lock()
        self._current: Any = None
        # runs in a copy of the creating thread's context, so its log lines carry the command's fields
        self._thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._run,), name=f"watch-{node_name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        with self._lock:
            if self._current is not None:
                self._current.close()

    def _run(self) -> None:
        failures = 0
        relist = not self.resource_version
        while not self.stop_event.is_set() and not self.deadline.expired:
            try:
                if relist:
                    pods, self.resource_version = self.kube.list_pods_on_node(self.node_name)
                    self.inbox.put(("snapshot", pods))
                    relist = False
                seconds = math.ceil(min(self.deadline.remaining(), MAX_WATCH_SECONDS))
                if seconds <= 0:
                    return
                watch = self.kube.watch_pods_on_node(self.node_name, self.resource_version, seconds)
                with self._lock:
                    self._current = watch
                    if self.stop_event.is_set():
                        watch.close()
                try:
                    for event in watch:
                        if event.type == "ERROR":
                            relist = True  # 410 Gone (resourceVersion too old) or another watch error
                            break
                        if event.resource_version:
                            self.resource_version = event.resource_version
                        if event.type != "BOOKMARK":
                            self.inbox.put(("event", event))
                finally:
                    with self._lock:
                        self._current = None
                    watch.close()
                failures = 0
            except NodeManagerError as err:
                if self.stop_event.is_set():
                    return
                failures += 1
                relist = True
                self.inbox.put(("watch_error", str(err)))
                self.clock.sleep(min(2.0, 0.1 * 2**failures, self.deadline.remaining()), self.stop_event)
            except Exception as err:
                log.exception("pod watcher on %s crashed", self.node_name)
                self.inbox.put(("watch_error", f"internal error: {err}"))
                return
