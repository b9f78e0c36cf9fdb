"""Finding a command's node: by the instance's ``spec.providerID``, never by a name alone (a node name is reused by
the next instance that gets the same private address)."""

from __future__ import annotations

from agent.drain.ports import DrainApi
from agent.kube.views import NodeView
from core.exceptions import NodeNotFoundError


def node_of_instance(kube: DrainApi, instance_id: str, node_name: str | None = None, scan: bool = True) -> NodeView:
    """The node whose ``spec.providerID`` names ``instance_id``; the ``node_name`` hint (the command's, from
    ``NODE#``) is tried first and used only if its providerID matches, then ``node_for_instance`` (the name the node
    watch last saw for the instance, else a paged scan unless ``scan`` is False: a drain waiting for its node to
    register probes the index often, ``agent.consumer.steps.NodeWait``): never one list of every node.

    Raises:
        NodeNotFoundError: no such node. KubernetesApiError / KubernetesRejectedError: see ``KubeAdapter``.
    """
    if node_name:
        node = kube.get_node(node_name)
        if node is not None and node.instance_id == instance_id:
            return node
    found = kube.node_for_instance(instance_id, scan)
    if found is not None:
        return found
    raise NodeNotFoundError(instance_id)
