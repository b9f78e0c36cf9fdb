"""The DaemonSet controller: one pod per node whose labels match the template's ``nodeSelector`` and whose taints the
template tolerates; cordoned (unschedulable) nodes keep theirs and get one. Pods are created bound to their node.
"""

from __future__ import annotations

from localworld.simulator.base import Action, Controller, View
from localworld.simulator.objects import fits, is_live
from localworld.simulator.pods import new_pod, owned_pods


class DaemonSetController(Controller):
    """Plans the missing pod of each DaemonSet on each node it fits."""

    def plan(self, view: View, actions: list[Action]) -> None:
        owned = owned_pods(view.pods)
        for key, ds in view.dsets.items():
            meta = ds["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            on_node = {(p.get("spec") or {}).get("nodeName") for p in owned.get(meta["uid"], []) if is_live(p)}
            for name, node in view.nodes.items():
                if name in on_node or not fits(template_spec, node, ignore_unschedulable=True):
                    continue
                if self.recent.check("ds-create", f"{meta['uid']}/{name}"):
                    continue
                body = new_pod(ds, "DaemonSet", name)
                actions.append(
                    (f"create {key} pod on {name}", lambda body=body, node=node: self.pod_writer.create(body, node))
                )
