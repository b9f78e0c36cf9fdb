"""What the drain needs of the Kubernetes API, as typed ports (``agent.kube.client.KubeAdapter`` fits all three), of
the settings (``BackoffSettings``) and of the Event recorder (``ResultEvents``).

The engine depends on these, not on the adapter class, so a wrapper (``agent.metrics.CountingEvictions``) or an
in-memory cluster can stand in. Errors are those of ``KubeAdapter`` (``agent.kube.errors.kube_error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agent.drain.results import NodeCommandResult
from agent.kube.eviction import EvictionResponse
from agent.kube.views import NodeView, PodView
from agent.kube.watch import PodWatch
from core.settings import PdbDeadlinePolicy


class PodLister(Protocol):
    """The pod reads of the drain's watcher."""

    def list_pods_on_node(self, node_name: str) -> tuple[list[PodView], str]:
        """The node's pods and the list's resourceVersion."""
        ...

    def watch_pods_on_node(self, node_name: str, resource_version: str, timeout_seconds: int) -> PodWatch:
        """A watch on the node's pods from ``resource_version``, ended by the apiserver after ``timeout_seconds``."""
        ...


class EvictionApi(PodLister, Protocol):
    """The calls of the drain's evictions."""

    def evict_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> EvictionResponse:
        """POST an Eviction; never raises for an HTTP or connection error."""
        ...

    def delete_pod(
        self, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> bool:
        """DELETE a pod; False when it was already gone."""
        ...


class DrainApi(EvictionApi, Protocol):
    """Every call the drain engine makes."""

    def get_node(self, name: str) -> NodeView | None:
        """The node called ``name``, None if there is none."""
        ...

    def node_for_instance(self, instance_id: str, scan: bool = True) -> NodeView | None:
        """The node whose ``spec.providerID`` names ``instance_id`` (from the watch cache, else, with ``scan``, a
        paged list), None if there is none."""
        ...

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> NodeView | None:
        """Apply a merge patch; None when a resourceVersion precondition lost a race."""
        ...

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        """Whether the DaemonSet exists."""
        ...


class BackoffSettings(Protocol):
    """What the engine needs of the agent's settings (``core.settings.AgentSettings`` has it)."""

    @property
    def eviction_backoff_seconds(self) -> float: ...

    @property
    def eviction_backoff_max_seconds(self) -> float: ...

    @property
    def drain_grace_margin_seconds(self) -> float: ...

    @property
    def drain_pdb_deadline_policy(self) -> PdbDeadlinePolicy: ...


class ResultEvents(Protocol):
    """Posts a result's Kubernetes Event on its Node (``agent.events.NodeEventRecorder`` does)."""

    def record(self, node: NodeView, result: NodeCommandResult) -> bool:
        """Post the Event summarizing ``result``; True when posted. Never raises."""
        ...
