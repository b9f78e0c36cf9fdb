"""The ReplicaSet controller: keeps ``spec.replicas`` live (not terminating, not finished) pods per ReplicaSet, with
ownerReferences; scales down by deleting the surplus.

New pods are placed at creation (bound to the node the scheduler would pick) and started at once on a Ready node, so
a replacement appears in one pass. A ReplicaSet annotated ``localworld.node-manager/prefer-node`` gets its pods on that
node while it is a candidate (for benchmarks that fill one node).
"""

from __future__ import annotations

from localworld.simulator.base import Action, Controller, View
from localworld.simulator.objects import is_live, pod_ready
from localworld.simulator.pods import new_pod, owned_pods
from localworld.simulator.scheduler import pick_node

PREFER_NODE_ANNOTATION = "localworld.node-manager/prefer-node"


class ReplicaSetController(Controller):
    """Plans pod creations and scale-down deletions per ReplicaSet (see module doc)."""

    def plan(self, view: View, actions: list[Action]) -> None:
        nodes = view.nodes
        owned = owned_pods(view.pods)
        for key, rs in view.rsets.items():
            meta = rs["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            replicas = int((rs.get("spec") or {}).get("replicas", 1))
            live = [p for p in owned.get(meta["uid"], []) if is_live(p)]
            missing = replicas - len(live)
            prefer = (meta.get("annotations") or {}).get(PREFER_NODE_ANNOTATION)
            template_spec = ((rs.get("spec") or {}).get("template") or {}).get("spec") or {}
            for _ in range(max(0, missing)):
                node = pick_node(template_spec, nodes, view.load, prefer)
                body = new_pod(rs, "ReplicaSet", node)
                actions.append(
                    (
                        f"create pod for {key}",
                        lambda body=body, node=node: self.pod_writer.create(body, nodes.get(node or "")),
                    )
                )
            if missing < 0:
                # surplus: unbound first, then not ready, then the newest (ReplicaSet controller's ActivePods order)
                victims = sorted(
                    live,
                    key=lambda p: (
                        bool((p.get("spec") or {}).get("nodeName")),
                        pod_ready(p),
                        p["metadata"].get("creationTimestamp", ""),
                    ),
                )
                for pod in victims[:-missing]:
                    if not self.recent.check("scale-down", pod["metadata"]["uid"]):
                        actions.append((f"scale down {key}", lambda pod=pod: self.pod_writer.delete(pod)))
