"""The simulated agent receives as the product's consumer long-polls SQS (``agent.consumer.loop``, ReceiveMessage with
``WaitTimeSeconds``), on the simulation's queue (``sim.sqs.SimQueue``): a message is received the instant it becomes
visible (sent, its visibility timeout over), an idle agent receives once per wait, a full in-flight bound receives
again when a job ends, a receive error backs off as the loop does, and a process never has two receives pending
whatever its restarts and leadership changes."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from adapters.dynamo.store import Store
from agent.consumer.loop import receive_backoff_seconds
from core.settings import AgentSettings
from sim.agent import SimAgent
from sim.dynamo import MemoryDynamo
from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel, Step
from sim.kube import SimKube
from sim.kube_objects import Budget
from sim.sqs import SimQueue
from tests.unit.sim.agent_world import CLUSTER, AutoScaling, drain

NS = "default"
POLL = "agent:agent:poll"


class Small:
    """Three nodes, a deployment of 6 behind a budget that allows none to go (a drain waits for its deadline), the
    agent on the simulation's queue and table."""

    def __init__(self, seed: int = 3, **settings: Any) -> None:
        self.kernel = Kernel(seed)
        self.faults = Faults(self.kernel)
        self.kube = SimKube(self.kernel)
        for i in range(3):
            self.kube.add_node(f"n{i}", f"i-{i:017x}", "us-east-1a")
        self.kube.add_deployment(NS, "web", 6, grace=20)
        self.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=6))
        self.queue = SimQueue(self.kernel, self.faults)
        table = MemoryDynamo(self.kernel, self.faults).table("node-manager-state")
        self.store = Store(table, CLUSTER)
        self.settings = AgentSettings(cluster_name=CLUSTER, table_name=table.name, queue_url="q", **settings)
        self.polls: list[float] = []  # the instants of the agent's receives
        with self.kernel.installed():
            autoscaling = AutoScaling(kernel=self.kernel)
            self.agent = SimAgent(self.kernel, self.kube, self.queue, table, autoscaling, self.settings)
        self.run(30.7)  # pods scheduled and Ready; off any whole second

    def run(self, seconds: float, check: Any = None) -> None:
        def step(s: Step) -> None:
            if s.label == POLL:
                self.polls.append(s.at)
            if check is not None:
                check(s)

        with self.kernel.installed():
            self.kernel.run(self.kernel.t + seconds, after_step=step)

    def send(self, command_id: str, node: int, seconds: float) -> str:
        """What a Lambda does: record, then send; the message id."""
        command = drain(self.kernel, command_id, f"i-{node:017x}", seconds)
        with self.kernel.installed():
            self.store.record_command(command, ttl_seconds=86400)
            return self.queue.send_command(command)

    def receives(self) -> int:
        return self.queue.calls.get("ReceiveMessage", 0)


def test_a_sent_message_is_received_at_the_instant_it_is_sent() -> None:
    w = Small()
    sent = w.kernel.t
    message_id = w.send("d1", 0, 900)
    w.run(0)  # the actions of this instant only
    message = w.queue.messages[message_id]
    assert (message.receive_count, message.received_at) == (1, sent)  # a 2 s poll would come at 32 s
    assert w.kube.node_view("n0").unschedulable  # type: ignore[union-attr]


@pytest.mark.parametrize("wait", [10, 20])
def test_an_idle_agent_receives_once_per_long_poll_wait(wait: int) -> None:
    w = Small(poll_wait_seconds=wait)
    before = w.receives()
    w.run(3600)
    assert w.receives() - before == 3600 // wait  # not 1,800 receives of a 2 s poll
    assert all(b - a == wait for a, b in pairwise(w.polls))


def test_a_message_whose_visibility_lapses_is_received_the_instant_it_does() -> None:
    """The process dies mid-drain: its message comes back when the last heartbeat's extension ends, and the started
    process receives it then, not at its next poll."""
    w = Small()
    message_id = w.send("d1", 0, 900)
    w.run(24)
    w.agent.restart(down_seconds=5)
    message = w.queue.messages[message_id]
    visible = message.visible_at
    assert visible == 80.0  # the last heartbeat's extension (at 50 s); the new process, up at 59.7 s, waits for it
    w.run(visible - w.kernel.t)
    assert (message.receive_count, message.received_at) == (2, visible)  # a 2 s poll from 59.7 s would come at 81.7 s


def test_a_full_in_flight_bound_receives_again_when_a_job_ends() -> None:
    w = Small(concurrency=1, max_in_flight=1)
    w.send("d1", 0, 60)  # held by the budget: times out at its deadline
    w.run(1)
    second = w.send("d2", 1, 900)
    ended: list[float] = []

    def check(s: Step) -> None:
        if not ended and "d1" not in w.agent.running:
            ended.append(s.at)
        if not ended:  # the bound is full: d2 waits in the queue, and nothing polls meanwhile
            assert w.queue.messages[second].receive_count == 0 and s.label != POLL

    polls = len(w.polls)
    w.run(120, check)
    assert w.store.get_command("d1")["status"] == "timed_out"  # type: ignore[index]
    message = w.queue.messages[second]
    assert (message.receive_count, message.received_at) == (1, ended[0])  # at the instant the slot freed
    assert w.polls[polls] == ended[0]


def test_a_drain_probing_for_its_node_holds_its_place_in_the_bound_and_frees_it_when_it_ends() -> None:
    """The product's consumer holds a thread (``CommandConsumer._busy``) for a drain sleeping between its node
    probes, as for one draining: with a bound of one, the next message waits in the queue until the probing ends."""
    w = Small(concurrency=1, max_in_flight=1)
    command = drain(w.kernel, "d1", "i-0000000000000000f", 60, reason="spot-interruption: no node yet")
    with w.kernel.installed():
        w.store.record_command(command, ttl_seconds=86400)
        w.queue.send_command(command)
    w.run(1)
    assert "d1" in w.agent.backing_off  # probing: its instance has no node
    second = w.send("d2", 1, 900)
    freed: list[float] = []

    def check(s: Step) -> None:
        if not freed and "d1" not in w.agent.backing_off:
            freed.append(s.at)
        if not freed:
            assert w.queue.messages[second].receive_count == 0

    w.run(120, check)
    assert w.store.get_command("d1")["status"] == "skipped"  # type: ignore[index]  # its deadline, no node
    message = w.queue.messages[second]
    assert freed and (message.receive_count, message.received_at) == (1, freed[0])  # at the instant it freed


def test_a_receive_error_backs_off_as_the_consumer_loop_does() -> None:
    w = Small()
    start = w.kernel.t
    w.faults.add(FaultWindow("sqs", "ReceiveMessage", start, start + 40, "ServiceUnavailable"))
    w.run(120)
    errors = w.agent.counts["receive_errors"]
    polls = [t for t in w.polls if t >= start]
    gaps = [round(b - a, 6) for a, b in pairwise(polls)]
    assert gaps[:errors] == [receive_backoff_seconds(n) for n in range(1, errors + 1)]  # 1, 2, 4, 8, 16, 30 s
    assert errors == 5 and polls[errors] >= start + 40  # refused at 40, 41, 43, 47 and 55 s; answered at 71 s
    assert gaps[errors:] == [10.0] * len(gaps[errors:])  # then long polls again


def test_restarts_and_leadership_changes_leave_at_most_one_receive_pending() -> None:
    w = Small()
    for i in range(3):
        w.send(f"d{i}", i, 600)

    def pending(s: Step) -> None:
        waits = [e for _, _, e in w.kernel._queue if e.label == POLL and not e.cancelled]
        assert len(waits) <= 1, (s, [e.at for e in waits])

    w.run(5, pending)
    w.agent.restart(down_seconds=3)
    w.agent.restart(down_seconds=3)  # already down: nothing
    w.run(7, pending)
    w.agent.lead(False)
    w.agent.lead(True)  # leading again before the step-down
    w.send("d3", 0, 600)
    w.run(40, pending)
    w.agent.lead(False)
    w.run(60, pending)  # stepped down: a standby receives nothing
    assert not w.agent.leading and w.agent._wake is None
    standing = w.receives()
    w.send("d4", 1, 600)
    w.run(30, pending)
    assert w.receives() == standing
    w.agent.lead(True)
    w.run(0, pending)
    assert w.receives() == standing + 1
