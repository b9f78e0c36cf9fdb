"""No command is dead-lettered for nothing, nor stranded, on simulated time (issue 11, "nothing is lost"): the
simulated agent (the product's worker, Store and heartbeat) against the simulation's SQS queue with its dead-letter
queue (``sim.sqs.SimQueue``, maxReceiveCount 3) and table (``sim.dynamo``), and the replenisher's command sweep
(``lambdas.common.sweep.sweep_commands``, every tick as the replenisher runs it).

- A long drain, held by a PodDisruptionBudget, gets copies of its message (a Lambda's re-sends): each copy is deleted
  as redundant, none spends the queue's receives until the dead-letter queue, and the drain ends ``succeeded``.
- The agent dies mid-drain and its message is gone (dead-lettered): the sweep sends the command again once its
  heartbeat is stale, and the restarted agent takes it over and finishes it.
"""

from __future__ import annotations

import logging
from typing import Any

from adapters.dynamo.commands import recorded_command
from adapters.dynamo.store import Store
from core.settings import AgentSettings
from lambdas.common.sweep import sweep_commands
from sim.agent import SimAgent
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_objects import Budget
from sim.sqs import SimQueue
from tests.unit.sim.agent_world import CLUSTER, AutoScaling, drain

NS = "default"
N0 = "i-00000000000000000"
TICK_SECONDS = 120.0  # the replenisher's tick (infra.replenisher.DEFAULT_TICK_MINUTES)
SWEEP_SECONDS = 300  # COMMAND_SWEEP_SECONDS' default


class Small:
    """Three nodes, a deployment of 6 behind a budget that allows none to go (the drain waits), the agent."""

    def __init__(self, seed: int = 5) -> None:
        self.kernel = Kernel(seed)
        faults = Faults(self.kernel)
        self.kube = SimKube(self.kernel)
        for i in range(3):
            self.kube.add_node(f"n{i}", f"i-{i:017x}", "us-east-1a")
        self.kube.add_deployment(NS, "web", 6, grace=20)
        self.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=6))
        self.queue = SimQueue(self.kernel, faults)
        table = MemoryDynamo(self.kernel, faults).table("node-manager-state")
        self.store = Store(table, CLUSTER)
        settings = AgentSettings(cluster_name=CLUSTER, table_name=table.name, queue_url="q")
        self.swept: list[str] = []
        with self.kernel.installed():
            self.agent = SimAgent(self.kernel, self.kube, self.queue, table, AutoScaling(kernel=self.kernel), settings)
            self.kernel.after(TICK_SECONDS, "replenisher:tick", self.tick)
            self.run(30)  # pods scheduled and Ready

    def tick(self) -> None:
        self.kernel.after(TICK_SECONDS, "replenisher:tick", self.tick)
        done = sweep_commands(
            self.store, self.queue, self.kernel.now(), SWEEP_SECONDS, dry_run=False, logger=logging.getLogger("sweep")
        )
        self.swept += done["resent"]

    def run(self, seconds: float) -> None:
        with self.kernel.installed():
            self.kernel.run(self.kernel.t + seconds)

    def send(self, command: Any) -> None:
        """What a Lambda does: record, then send."""
        with self.kernel.installed():
            self.store.record_command(command, ttl_seconds=86400)
            self.queue.send_command(command)

    def resend(self, command_id: str) -> None:
        """Another message for the recorded command (a Lambda's re-send of a duplicate event, the sweep's)."""
        with self.kernel.installed():
            recorded = recorded_command(self.store.get_command(command_id))
            assert recorded is not None
            self.queue.send_command(recorded)

    def unblock(self) -> None:
        self.kube.budgets[f"{NS}/web"] = Budget(NS, "web", {"app": "web"}, min_available=5)

    def item(self, command_id: str) -> dict[str, Any]:
        item = self.store.get_command(command_id)
        assert item is not None
        return item


def test_copies_of_a_long_drains_message_are_deleted_and_nothing_is_dead_lettered() -> None:
    w = Small()
    w.send(drain(w.kernel, "d1", N0, 1800))
    w.run(10)
    holder = w.item("d1")
    assert holder["status"] == "running" and holder["message_id"]
    for _ in range(3):  # a re-send a minute, while the budget holds the drain for minutes
        w.resend("d1")
        w.run(60)
    w.run(240)
    assert w.item("d1")["status"] == "running" and w.queue.dead_letters == []
    w.unblock()
    w.run(120)
    item = w.item("d1")
    assert item["status"] == "succeeded", item["result"]["message"]
    assert int(item["attempt"]) == 1  # the holder kept it throughout
    assert w.queue.dead_letters == [] and w.queue.messages == {}
    assert w.agent.worker.counters.snapshot()["redundant"] == 3


def test_a_drain_whose_worker_died_with_its_message_gone_is_sent_again_and_finished() -> None:
    w = Small()
    w.send(drain(w.kernel, "d2", N0, 1800))
    w.run(10)
    assert w.item("d2")["status"] == "running"
    w.agent.restart(down_seconds=5)
    # its message is lost too (dead-lettered after errors, say): only the sweep can bring the command back
    w.queue.dead_letters += list(w.queue.messages.values())
    w.queue.messages.clear()
    w.unblock()
    w.run(50)
    assert w.item("d2")["worker"] == "agent:0" and w.swept == []  # not stale yet: nothing sent
    # stale 60 s after the last heartbeat; the next tick (at most 120 s later) sends it, the new process takes it
    w.run(TICK_SECONDS + 60)
    assert w.swept == ["d2"]
    w.run(60)
    item = w.item("d2")
    assert item["status"] == "succeeded", item
    assert item["worker"] == "agent:1" and int(item["attempt"]) == 2
    w.run(SWEEP_SECONDS)
    assert w.swept == ["d2"]  # sent once
