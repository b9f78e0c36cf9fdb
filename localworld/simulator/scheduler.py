"""The scheduler: binds unbound pods to the least loaded Ready, schedulable node whose labels match the pod's
``nodeSelector`` and whose taints it tolerates (node affinity is not evaluated). Load is the number of live pods on a
node; ties go to the node name that sorts first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from localworld.rest import JSON
from localworld.simulator.base import Action, Controller, View
from localworld.simulator.objects import fits, is_live
from localworld.simulator.pods import pod_path


def node_load(pods: Mapping[str, JSON], nodes: Mapping[str, JSON]) -> dict[str, int]:
    """Live (not terminating, not finished) pods per node name, 0 for every node of ``nodes``."""
    load = dict.fromkeys(nodes, 0)
    for pod in pods.values():
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name in load and is_live(pod):
            load[node_name] += 1
    return load


def pick_node(
    spec: Mapping[str, Any], nodes: Mapping[str, JSON], load: dict[str, int], prefer: str | None = None
) -> str | None:
    """The node a pod with ``spec`` goes to: ``prefer`` if it fits, else the least loaded node that fits; None when
    none fits. The choice is counted in ``load``."""
    candidates = [name for name, node in nodes.items() if fits(spec, node)]
    if not candidates:
        return None
    if prefer is not None and prefer in candidates:
        choice = prefer
    else:
        choice = min(candidates, key=lambda name: (load.get(name, 0), name))
    load[choice] = load.get(choice, 0) + 1
    return choice


class Scheduler(Controller):
    """Plans Bindings for the live, unbound pods of the default scheduler."""

    def plan(self, view: View, actions: list[Action]) -> None:
        for key, pod in view.pods.items():
            spec = pod.get("spec") or {}
            if (
                spec.get("nodeName")
                or not is_live(pod)
                or spec.get("schedulerName", "default-scheduler") not in ("default-scheduler", "")
            ):
                continue
            uid = pod["metadata"]["uid"]
            if self.recent.held("bind", uid):
                continue
            choice = pick_node(spec, view.nodes, view.load)
            if choice is None:
                continue
            self.recent.check("bind", uid)
            actions.append((f"bind {key} to {choice}", lambda pod=pod, node=choice: self._bind(pod, node)))

    def _bind(self, pod: JSON, node: str) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.rest.post(f"{pod_path(pod)}/binding", body)
