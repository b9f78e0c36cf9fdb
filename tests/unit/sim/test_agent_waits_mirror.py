"""The simulated agent's waits follow the real worker's (``sim/agent_slots.py``, ``sim/agent_worker.py``): three places
where a review found them diverging, fixed."""

from __future__ import annotations

from datetime import timedelta

from adapters.dynamo.commands import tighten_deadline
from sim.kube_objects import Budget
from tests.unit.sim.agent_world import World, drain

LATE = "i-000000000000000a1"


def test_a_drain_tightened_while_it_waits_for_its_node_ends_its_wait_at_the_tightened_deadline() -> None:
    """The real worker's heartbeat tightens the job of a drain waiting for its node (``tighten_waiting`` ->
    ``Job.tighten``), and ``NodeWait.left`` then ends the wait at the tightened deadline (``skipped``); the simulated
    agent tightened only the jobs waiting for a slot, and its wait went on to NODE_REGISTRATION_WAIT_SECONDS."""
    w = World("memory", node_registration_wait_seconds=120)
    w.send(drain(w.kernel, "hook-late", LATE, 3600, reason="asg-lifecycle:nodes-a"))
    w.run(10)
    assert w.item("hook-late")["status"] == "running"  # waiting for its node
    with w.kernel.installed():
        when = (w.kernel.now() + timedelta(seconds=20)).replace(microsecond=0)
        assert tighten_deadline(w.store, "hook-late", when, by="spot-9", now=w.kernel.now())
    w.run(45)  # the tightened deadline, plus a heartbeat and a probe
    item = w.item("hook-late")
    assert item["status"] == "skipped", item["status"]


def test_a_waiting_drain_tightened_to_a_deadline_beyond_the_urgent_window_turns_urgent_on_time() -> None:
    """``DeadlineGate`` polls ``urgent`` every 0.5 s, so a waiting drain tightened to a deadline more than
    DRAIN_URGENT_SECONDS away is admitted over the slots once its (new) deadline is within the window; the simulated
    agent looked at it again only from its old deadline."""
    w = World("memory", drain_urgent_seconds=60, concurrency=1)
    # a refresh drain that holds the one slot: its node's pods are protected by a budget that allows nothing
    w.kube.add_deployment("db", "db", 1, grace=20)
    w.kube.add_budget(Budget("db", "db", {"app": "db"}, min_available=1))
    w.run(30)
    db_node = next(n for n, pods in w.kube.by_node.items() if any(k.startswith("db/") for k in pods))
    db_instance = w.kube.node_view(db_node).instance_id
    w.send(drain(w.kernel, "refresh-r1-0", db_instance, 1800, reason="refresh r1 step 0"))
    w.run(5)
    assert "refresh-r1-0" in w.agent.running  # holds the slot, blocked by the budget
    other = next(f"i-{i:017x}" for i in range(3) if f"i-{i:017x}" != db_instance)
    w.send(drain(w.kernel, "hook-1", other, 3600, reason="asg-lifecycle:nodes-a"))
    w.run(5)
    assert any(j.command.command_id == "hook-1" for _, _, j in w.agent.waiting)  # an hour left: waits its turn
    with w.kernel.installed():
        when = (w.kernel.now() + timedelta(seconds=120)).replace(microsecond=0)
        assert tighten_deadline(w.store, "hook-1", when, by="spot-9", now=w.kernel.now())
    w.run(15)  # the heartbeat tightened it: 2 minutes left, not yet within 60 s
    assert any(j.command.command_id == "hook-1" for _, _, j in w.agent.waiting)
    w.run(60)  # its deadline is within 60 s now: the real gate has admitted it over the slot
    assert "hook-1" in w.agent.running or w.item("hook-1")["status"] != "running", (
        "still waiting for the slot with",
        (w.agent.waiting[0][0] - w.kernel.now()).total_seconds() if w.agent.waiting else None,
        "s left",
    )


def test_a_late_node_that_registers_as_a_busy_control_plane_node_does_not_crash_the_simulation() -> None:
    """The simulated worker probes a late node again from a kernel action (``back_off(then=...)``); an error there
    (here ``ControlPlaneBusyError``) is logged and counted as ``SimAgent.handle`` counts one, and used to leave
    ``Kernel.run`` and end the simulation."""
    w = World("memory", max_control_plane_drains=1)
    w.kube.add_node("cp0", "i-00000000000000c00", "us-east-1a", control_plane=True)
    w.run(5)
    holder = drain(w.kernel, "spot-cp0", "i-00000000000000c00", 120, reason="spot-interruption:terminate")
    cp0 = w.kube.node_view("cp0")
    assert cp0 is not None
    w.agent.engine.guard.admit(holder, cp0)  # the one control-plane drain slot is held (a drain of cp0 under way)
    w.send(drain(w.kernel, "spot-late", LATE, 120, reason="spot-interruption:terminate"))
    w.run(10)
    assert w.item("spot-late")["status"] == "running"  # waiting for its node
    w.kube.add_node("cp-late", LATE, "us-east-1a", control_plane=True)  # a late master registers
    w.run(5)  # raises ControlPlaneBusyError out of the kernel
    assert w.item("spot-late")["status"] == "running"  # waits for a control-plane slot, as the real worker does
