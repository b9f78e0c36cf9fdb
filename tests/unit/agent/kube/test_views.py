"""Typed views of Kubernetes objects (``agent.kube.views``), built from the API's JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.kube.views import NodeView

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def node(unschedulable: bool = False, annotations: dict[str, str] | None = None) -> NodeView:
    return NodeView.from_api(
        {
            "metadata": {"name": "n1", "uid": "nu", "resourceVersion": "42", "annotations": annotations or {}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0", "unschedulable": unschedulable},
        }
    )


def test_node_view_reads_provider_id_labels_and_readiness() -> None:
    view = NodeView.from_api(
        {
            "metadata": {"name": "i-0123456789abcdef0", "labels": {"kops.k8s.io/instancegroup": "nodes-a"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]
            },
        }
    )
    assert view.instance_id == "i-0123456789abcdef0"
    assert view.ready and not view.unschedulable and view.cordoned_by is None
    assert view.labels["kops.k8s.io/instancegroup"] == "nodes-a"
    assert NodeView.from_api({"metadata": {"name": "x"}, "spec": {"providerID": "gce://p/z/x"}}).instance_id is None
