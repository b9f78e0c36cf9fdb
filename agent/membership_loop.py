"""The membership reporter's loop (``agent.membership.MembershipReporter`` mixes this in): follow the Node watch,
confirm the membership every ``MEMBERSHIP_RESYNC_SECONDS`` and list every node again every
``MEMBERSHIP_RELIST_SECONDS``.

What a node's item says comes from the watch: each ADDED, MODIFIED or DELETED event writes (or deletes) the item
at once when its content changed (``apply``). Between two lists the reporter's own view is as current as the watch,
so a confirmation (``confirm``) needs no list: it writes the items whose refresh or group recheck came due and the
``MEMBERSHIP`` mark. A full list (``resync``) catches what a watch cannot say (an event lost with a connection, a
node whose group lookup failed), deletes the items of instances that have no node, and seeds a new leadership term.
The list is paged (``limit``/``continue``), and at 1,000 nodes each one is about a megabyte the apiserver serialises;
client-go's informers list only at their start and after a watch fails. Listing every 10 minutes instead of every
minute keeps a safety net at a tenth of the load (and of the agent's CPU, which compared every node at every
resync).

A watch that fails, or one the apiserver ends with 410 Gone (the resourceVersion compacted away: Kubernetes API
Concepts, "Efficient detection of changes"), is followed by a list at once; a loop that keeps failing backs off up
to 30 s. A watch that hangs blocks the confirmations too, so the mark goes stale and readers stop trusting it (the
Lambdas' ``MEMBERSHIP_MAX_AGE_SECONDS``, the "agent silent" alarm): a confirmation never vouches for a view the
watch stopped updating.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from agent.kube.views import NodeEvent, NodeView
from core.exceptions import KubernetesApiError, WatchExpiredError

log = logging.getLogger(__name__)

HTTP_GONE = 410  # a watch's resourceVersion is too old: list again
MAX_BACKOFF_SECONDS = 30.0


class NodeSource(Protocol):
    """Node reads the reporter needs (``agent.kube.client.KubeAdapter``)."""

    def list_node_pages(self, page_size: int | None = None) -> Iterable[tuple[list[NodeView], str]]:
        """All nodes, a page at a time, each page with the list's resourceVersion."""
        ...

    def watch_nodes(self, resource_version: str, timeout_seconds: int) -> Iterable[NodeEvent]:
        """Events after ``resource_version``; the iteration ends after ``timeout_seconds``."""
        ...


class WatchLoop:
    """The loop of a reporter that has ``resync`` (list), ``confirm`` and ``apply`` (one watch event)."""

    nodes: NodeSource
    resync_seconds: float
    relist_seconds: float
    on_error: Callable[[BaseException], None] | None
    _watch: Any

    def resync(self) -> str:
        raise NotImplementedError

    def confirm(self) -> None:
        raise NotImplementedError

    def apply(self, event_type: str, node: NodeView) -> None:
        raise NotImplementedError

    def new_term(self) -> None:
        raise NotImplementedError

    def run(self, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
        """List, then follow the watch until ``stop`` is set: a confirmation every ``resync_seconds``, a list
        every ``relist_seconds`` (and after a watch that failed). ``clock``: monotonic seconds.

        Never raises: an error is logged and followed by a list after a backoff (at most 30 s).
        """
        resource_version: str | None = None
        next_relist = next_confirm = 0.0
        failures = 0
        self.new_term()  # another leader may have written meanwhile
        while not stop.is_set():
            try:
                now = clock()
                if resource_version is None or now >= next_relist:
                    resource_version = self.resync()
                    next_relist = now + self.relist_seconds
                    next_confirm = now + self.resync_seconds
                elif now >= next_confirm:
                    self.confirm()
                    next_confirm = now + self.resync_seconds
                timeout = max(1, int(min(next_confirm, next_relist) - clock()))
                opened = clock()
                resource_version = self.follow(resource_version, timeout, stop)
                failures = 0
                if clock() - opened < 1:
                    stop.wait(1)  # a watch the server ended at once: do not spin
            except WatchExpiredError:
                log.info("node watch expired (410 Gone), listing again")
                resource_version = None
            except Exception as err:
                failures += 1
                delay = min(MAX_BACKOFF_SECONDS, 0.5 * 2 ** min(failures, 6))
                log.exception("membership error, re-listing after seconds=%.1f", delay)
                if self.on_error is not None:
                    self.on_error(err)
                resource_version = None
                self.new_term()
                stop.wait(delay)

    def close(self) -> None:
        """Close the open watch (from another thread, at shutdown), so ``run`` notices ``stop`` at once."""
        watch = self._watch
        if watch is not None and hasattr(watch, "close"):
            watch.close()

    def follow(self, resource_version: str, timeout_seconds: int, stop: threading.Event | None = None) -> str:
        """Apply watch events until the watch ends or ``stop``; returns the resourceVersion to resume from.

        Raises:
            WatchExpiredError: the apiserver answered 410 Gone (list again).
            KubernetesApiError: another error event.
        """
        self._watch = self.nodes.watch_nodes(resource_version, timeout_seconds)
        try:
            for event in self._watch:
                if stop is not None and stop.is_set():
                    break
                if event.type == "ERROR":
                    if event.code == HTTP_GONE:
                        raise WatchExpiredError(f"node watch from resourceVersion {resource_version}")
                    raise KubernetesApiError(f"node watch error event code={event.code}")
                if event.node is not None:
                    self.apply(event.type, event.node)
                resource_version = event.resource_version or resource_version
        finally:
            self._watch = None
        return resource_version
