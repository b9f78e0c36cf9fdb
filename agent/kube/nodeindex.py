"""A light cache of the nodes the agent has seen: instance id -> node name, nothing else.

Fed by every node list page and node watch event that passes through ``KubeAdapter`` (the membership reporter
keeps both going on the leader), read when a command names an instance (``KubeAdapter.node_for_instance``), so a
command's node is found with one GET instead of a list of every node. Two short strings a node: about 200 bytes,
0.4 MB at 2,000 nodes, where keeping the nodes themselves would hold their labels, annotations and conditions.

Node -> instance comes from ``spec.providerID`` (``NodeView.instance_id``). A name read here is only a hint: the
reader checks the node's providerID after the GET (a node can be deleted and its name reused).
"""

from __future__ import annotations

import threading

from agent.kube.views import NodeEvent, NodeView


class NodeIndex:
    """Instance id -> node name; thread-safe (the watch thread writes, command workers read)."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()

    def saw(self, node: NodeView, deleted: bool = False) -> None:
        """Record ``node`` (or forget it when ``deleted``); a node without an AWS providerID is ignored."""
        instance_id = node.instance_id
        if instance_id is None:
            return
        with self._lock:
            if deleted:
                if self._names.get(instance_id) == node.name:
                    del self._names[instance_id]
            else:
                self._names[instance_id] = node.name

    def saw_event(self, event: NodeEvent) -> None:
        """Record the node of a watch event (ADDED, MODIFIED, DELETED; others carry no node)."""
        if event.node is not None and event.type in ("ADDED", "MODIFIED", "DELETED"):
            self.saw(event.node, deleted=event.type == "DELETED")

    def name(self, instance_id: str) -> str | None:
        """The name of the node last seen for ``instance_id``, None when none was seen (or it was deleted)."""
        with self._lock:
            return self._names.get(instance_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._names)
