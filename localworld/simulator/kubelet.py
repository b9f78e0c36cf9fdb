"""The kubelets of every node, and pod GC of deleted nodes.

- marks bound pods Running with Ready=True once their node is Ready (``PodWriter.start``);
- completes a graceful deletion (``deletionTimestamp`` set) by deleting with grace 0 once
  ``deletionGracePeriodSeconds`` have passed since the simulator saw it;
- deletes (grace 0) the pods of a Node that went away, as the pod garbage collector does.
"""

from __future__ import annotations

import time

from localworld.simulator.base import Action, Controller, Shared, View
from localworld.simulator.objects import is_finished, is_terminating, node_ready, pod_ready


class Kubelet(Controller):
    """Plans the kubelets' pod status writes and deletions (see module doc)."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._terminating_since: dict[str, float] = {}  # pod uid -> monotonic time first seen terminating
        self._known_nodes: set[str] = set()  # every node name ever seen: a pod's node missing from it is not yet known

    def plan(self, view: View, actions: list[Action]) -> None:
        nodes = view.nodes
        self._known_nodes |= set(nodes)
        now = time.monotonic()
        seen_terminating = set()
        for key, pod in view.pods.items():
            meta, spec = pod["metadata"], pod.get("spec") or {}
            uid = meta["uid"]
            node_name = spec.get("nodeName")
            if node_name and node_name not in nodes and node_name in self._known_nodes:
                if not self.recent.check("gc-orphan", uid):
                    actions.append(
                        (f"delete pod {key} of deleted node", lambda pod=pod: self.pod_writer.force_delete(pod))
                    )
                continue
            if is_terminating(pod):
                seen_terminating.add(uid)
                since = self._terminating_since.setdefault(uid, now)
                grace = meta.get("deletionGracePeriodSeconds")
                grace = 0 if grace is None else int(grace)
                if grace > 0 and now - since >= grace and not self.recent.check("finish-delete", uid):
                    actions.append((f"finish deletion of {key}", lambda pod=pod: self.pod_writer.force_delete(pod)))
                continue
            if not node_name or is_finished(pod):
                continue
            node = nodes.get(node_name)
            if node is None or not node_ready(node):
                continue
            status = pod.get("status") or {}
            if status.get("phase") == "Running" and pod_ready(pod):
                continue
            if not self.recent.check("run", uid):
                actions.append((f"start pod {key}", lambda pod=pod, node=node: self.pod_writer.start(pod, node)))
        for uid in list(self._terminating_since):
            if uid not in seen_terminating:
                del self._terminating_since[uid]
