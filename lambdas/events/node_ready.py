"""The agent's "Node Ready": nodes that became Ready, batched (a hint for the refresher to read again, never a fact).

Sent by the agent's leader (``agent/ready.py``) on the default bus when its node watch or resync sees a node go from
absent or NotReady to Ready, after the node's ``NODE#`` item says so. Up to ``MAX_NODES`` nodes per event; the
agent sends at most one PutEvents call (up to 10 entries) every ``READY_EVENT_SECONDS``. The refresher's rule
(``infra/refresher.py``) passes the cluster's to the refresher, which reads the active run and, when the event names
a group of the run (or one of its instances), advances it: the pass reads membership and the groups itself, so the
event only decides *when* to look, never what is Ready. Example (fixture of record
``tests/events/agent-node-ready.json``)::

    {
        "version": "0", "id": "0d9c7e52-8b1f-4a7e-9a53-2c4f1e0b6d11",
        "detail-type": "Node Ready", "source": "node-manager.agent",
        "account": "123456789012", "time": "2024-03-05T10:31:12Z", "region": "us-east-1", "resources": [],
        "detail": {"cluster": "demo.k8s.local",
                   "nodes": [{"instance_id": "i-0a1b2c3d4e5f60718", "node_name": "ip-10-0-1-17.ec2.internal",
                              "asg_name": "nodes-us-east-1a.demo.k8s.local"}]}
    }

``asg_name`` is the agent's view of the instance's group (null when it could not tell).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.model import INSTANCE_ID_RE
from lambdas.events.base import AwsEventModel
from lambdas.events.event import Event, EventKind

SOURCE = "node-manager.agent"
DETAIL_TYPE = "Node Ready"
MAX_NODES = 50  # nodes per event (the agent's batch); more is malformed


class ReadyNode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    instance_id: str = Field(pattern=INSTANCE_ID_RE.pattern)
    node_name: str = Field(min_length=1, max_length=253)  # a Kubernetes object name (DNS subdomain)
    asg_name: str | None = Field(default=None, min_length=1, max_length=255)  # Auto Scaling's name limit


class NodeReadyDetail(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    cluster: str = Field(min_length=1)
    nodes: list[ReadyNode] = Field(min_length=1, max_length=MAX_NODES)


class NodeReady(AwsEventModel):
    detail: NodeReadyDetail


def to_event(event: NodeReady) -> Event:
    """The report as an ``Event`` of kind ``node_ready`` (``instance_ids``, ``asg_names``: "" for a node whose group the
    agent could not tell)."""
    return Event(
        kind=EventKind.NODE_READY,
        event_id=event.id,
        event_time=event.time,
        cluster=event.detail.cluster,
        instance_ids=tuple(n.instance_id for n in event.detail.nodes),
        asg_names=tuple(n.asg_name or "" for n in event.detail.nodes),
        source=event.source,
        detail_type=event.detail_type,
        region=event.region,
        account=event.account,
    )
