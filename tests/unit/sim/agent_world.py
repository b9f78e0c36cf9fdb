"""A small world for the simulated agent's tests: a kernel, an in-memory cluster, a queue with SQS's visibility
rules on simulated time, moto's DynamoDB table (the real ``Store`` runs on it) and an Auto Scaling stand-in that
records lifecycle calls."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from adapters.aws.ports import Membership
from adapters.dynamo.store import Store
from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind, DrainOptions
from core.settings import AgentSettings
from sim.agent import SimAgent
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_objects import Budget

CLUSTER = "demo.k8s.local"
NS = "default"


@dataclass
class Message:
    id: str
    body: str
    visible_at: float = 0.0
    receives: int = 0
    receipt: str = ""


class Queue:
    """``CommandReceiver`` on simulated time: a received message is invisible for the visibility timeout, then
    comes back; a delete by its latest receipt removes it. A long poll waits for ``next_visible`` or a listener's
    news (``sim.agent.LongPollQueue``); ``receives`` counts the ReceiveMessage calls."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.messages: list[Message] = []
        self.deleted: list[str] = []
        self.receives = 0
        self.listeners: list[Callable[[float], None]] = []

    def next_visible(self) -> float | None:
        return min((m.visible_at for m in self.messages), default=None)

    def listen(self, wake: Callable[[float], None]) -> None:
        self.listeners.append(wake)

    def send(self, command: Command) -> None:
        self.messages.append(Message(f"m{len(self.messages) + len(self.deleted)}", command.model_dump_json()))
        for wake in self.listeners:
            wake(self.kernel.t)

    def receive(self, max_messages: int, wait_seconds: int, visibility_seconds: int) -> list[dict[str, Any]]:
        self.receives += 1
        out = []
        for m in self.messages:
            if len(out) == max_messages:
                break
            if m.visible_at <= self.kernel.t:
                m.receives += 1
                m.receipt = f"{m.id}#{m.receives}"
                m.visible_at = self.kernel.t + visibility_seconds
                out.append(
                    {
                        "MessageId": m.id,
                        "ReceiptHandle": m.receipt,
                        "Body": m.body,
                        "Attributes": {"ApproximateReceiveCount": str(m.receives)},
                    }
                )
        return out

    def delete(self, receipt: str) -> None:
        for m in self.messages:
            if m.receipt == receipt:
                self.messages.remove(m)
                self.deleted.append(m.id)
                return

    def set_visibility(self, receipt: str, seconds: int) -> None:
        for m in self.messages:
            if m.receipt == receipt:
                m.visible_at = self.kernel.t + seconds
                for wake in self.listeners:
                    wake(m.visible_at)


@dataclass
class AutoScaling:
    """Group reads answer nothing; lifecycle calls are recorded and accepted."""

    completed: list[tuple[float, str]] = field(default_factory=list)
    heartbeats: list[tuple[float, str]] = field(default_factory=list)
    kernel: Kernel | None = None

    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]:
        return []

    def describe_group(self, asg_name: str) -> dict[str, Any] | None:
        return None

    def membership(self, instance_id: str) -> Membership | None:
        return None

    def group_names(self, instance_ids: Iterable[str]) -> dict[str, str]:
        return dict.fromkeys(instance_ids, "nodes")

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool:
        assert self.kernel is not None
        self.completed.append((self.kernel.t, action.instance_id))
        return True

    def record_heartbeat(self, action: LifecycleAction) -> bool:
        assert self.kernel is not None
        self.heartbeats.append((self.kernel.t, action.instance_id))
        return True


def drain(
    kernel: Kernel,
    command_id: str,
    instance_id: str,
    seconds: float,
    reason: str = "test",
    kind: CommandKind = CommandKind.DRAIN,
    **options: Any,
) -> Command:
    return Command(
        command_id=command_id,
        cluster=CLUSTER,
        kind=kind,
        instance_id=instance_id,
        reason=reason,
        deadline=kernel.now() + timedelta(seconds=seconds),
        options=DrainOptions(**options),
    )


def send(store: Store, queue: Queue, command: Command) -> None:
    """What a Lambda does: record the ``CMD#`` item, then send the message."""
    store.record_command(command, ttl_seconds=86400)
    queue.send(command)


class World:
    """Three nodes, a deployment of six pods under a budget of five, the queue, the table (moto's or, given "memory",
    the simulation's own) and the simulated agent on them, run until the pods are Ready."""

    def __init__(self, table: Any, seed: int = 7, **settings: Any) -> None:
        self.kernel = Kernel(seed)
        if table == "memory":
            table = MemoryDynamo(self.kernel, Faults(self.kernel)).table("node-manager-state")
        self.kube = SimKube(self.kernel)
        for i in range(3):
            self.kube.add_node(f"n{i}", f"i-{i:017x}", "us-east-1a")
        self.kube.add_daemonset("kube-system", "cni")
        self.kube.add_deployment(NS, "web", 6, grace=20)
        self.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=5))
        self.queue = Queue(self.kernel)
        self.autoscaling = AutoScaling(kernel=self.kernel)
        self.store = Store(table, CLUSTER)
        defaults: dict[str, Any] = {"cluster_name": CLUSTER, "table_name": table.name, "queue_url": "q"}
        self.settings = AgentSettings(**{**defaults, **settings})
        with self.kernel.installed():
            self.agent = SimAgent(self.kernel, self.kube, self.queue, table, self.autoscaling, self.settings)
            self.run(30)  # pods scheduled and Ready

    def run(self, seconds: float) -> None:
        with self.kernel.installed():
            self.kernel.run(self.kernel.t + seconds)

    def send(self, command: Any) -> None:
        with self.kernel.installed():
            send(self.store, self.queue, command)

    def item(self, command_id: str) -> dict[str, Any]:
        item = self.store.get_command(command_id)
        assert item is not None
        return item
