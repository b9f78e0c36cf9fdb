"""One node held in memory (``OneNode``), patched as the apiserver applies a merge patch, with the real release
decision (``agent.drain.cordon.decide_release``): the node the releaser's tests give it."""

from __future__ import annotations

from agent.drain.cordon import ENDING_ANNOTATION, UncordonDecision, decide_release
from agent.kube.views import CORDON_ANNOTATION, NodeView
from core.exceptions import NodeNotFoundError
from tests.unit.agent.consumer_world import INSTANCE


class OneNode:
    """One node, patched in memory as the apiserver would apply a merge patch of ``spec.unschedulable`` and our
    annotation."""

    def __init__(self, unschedulable: bool, holder: str | None, ending: str | None = None) -> None:
        self.unschedulable = unschedulable
        self.holder = holder
        self.ending = ending  # ENDING_ANNOTATION's value: a Spot warning marked the instance ending
        self.gone = False
        self.patches = 0

    def view(self) -> NodeView:
        annotations = {CORDON_ANNOTATION: self.holder} if self.holder else {}
        if self.ending:
            annotations[ENDING_ANNOTATION] = self.ending
        return NodeView.from_api(
            {
                "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "1", "annotations": annotations},
                "spec": {"providerID": f"aws:///us-east-1a/{INSTANCE}", "unschedulable": self.unschedulable},
            }
        )

    def find_node(self, instance_id: str, node_name: str | None = None) -> NodeView:
        if self.gone or instance_id != INSTANCE:
            raise NodeNotFoundError(instance_id)
        return self.view()

    def release_node(self, node: NodeView, command_id: str) -> tuple[NodeView, UncordonDecision]:
        decision = decide_release(self.view(), command_id)
        if decision.patch is not None:
            self.patches += 1
            self.unschedulable = bool(decision.patch["spec"].get("unschedulable"))
            self.holder = decision.patch["metadata"]["annotations"][CORDON_ANNOTATION]
        return self.view(), decision
