"""Rule 9, the cleanup: what a refresh run protects from it."""

from __future__ import annotations

import json

import pytest

from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide import decide
from lambdas.replenisher.decide.cleanup import run_instances
from lambdas.replenisher.plan import Note, Reason, Terminate
from lambdas.replenisher.world import World
from tests.unit.lambdas.replenisher.builders import SETTINGS, T0, group, ids, nodes_for


def _run(group_name: str, old: str, spare: str | None, baseline: list[str]) -> Run:
    step = RunStep(
        index=0,
        group=group_name,
        role="node",
        instance_id=old,
        state=StepState.DRAINING,
        surge_instance_id=spare,
        surge_baseline=baseline,
    )
    surge = GroupSurge(name=group_name, role="node", min_size=0, original_desired=2, original_max=4, raised=1)
    return Run(
        run_id="r1", cluster="c", options=RunOptions(), groups=[surge], steps=[step], created_at=T0, updated_at=T0
    )


def test_a_run_protects_its_old_instances_spares_and_baseline() -> None:
    run = _run("b", "i-0aaaaaaaabbbbbbbb", "i-0123456789abcdef0", ["i-0aaaaaaaabbbbbbbb", "i-0cccccccccccccccc"])
    assert run_instances(run) == {"i-0123456789abcdef0", "i-0aaaaaaaabbbbbbbb", "i-0cccccccccccccccc"}
    assert run_instances(Run.model_validate(json.loads(json.dumps(run.to_item())))) == run_instances(run)


def test_groups_of_an_active_run_are_not_cleaned_up_and_an_unreadable_run_stops_the_cleanup() -> None:
    b = group("b", "az-b", 2, ids("b", 2))
    stray = b.instances[0].instance_id
    nodes = {k: v for k, v in nodes_for(b).items() if k != stray}
    tick = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")
    in_run = World(
        groups={"b": b}, nodes=nodes, membership_confirmed=True, active_runs=(_run("b", ids("b", 2)[1], None, []),)
    )
    assert not any(isinstance(x, Terminate) for x in decide(tick, T0, SETTINGS, in_run).actions)
    other = World(
        groups={"b": b},
        nodes=nodes,
        membership_confirmed=True,
        active_runs=(_run("other", "i-0dddddddddddddddd", None, []),),
    )
    assert any(isinstance(x, Terminate) for x in decide(tick, T0, SETTINGS, other).actions)
    unreadable_world = World(groups={"b": b}, nodes=nodes, membership_confirmed=True, runs_unreadable=True)
    unreadable = decide(tick, T0, SETTINGS, unreadable_world)
    assert not any(isinstance(x, Terminate) for x in unreadable.actions)
    assert any(isinstance(x, Note) and x.reason is Reason.PROTECTED for x in unreadable.actions)


@pytest.mark.parametrize(
    "status, active",
    [
        ("running", True),
        ("pausing", True),
        ("cancelling", True),
        ("paused", False),
        ("succeeded", False),
        ("cancelled", False),
        ("failed", False),
        ("something-new", True),  # unknown: protect the capacity rather than judge it surplus
    ],
)
def test_which_refresh_runs_protect_their_capacity(status, active):
    from lambdas.replenisher.world import run_active

    assert run_active({"status": status}) is active


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_stale_membership_judges_no_instance_by_absence(confirmed: bool) -> None:
    # seed 30013 of the simulation: the agent's MEMBERSHIP mark stale (restarted, then most of its writes refused),
    # only two records fresh by their own write; every other instance read as one without a node, and the tick
    # terminated two masters and a worker with pods on it, none drained
    from datetime import timedelta

    from core.kops import Role

    workers = group("b", "az-b", 3, ids("b", 3))
    masters = group("m", "az-a", 2, ids("m", 2), role=Role.CONTROL_PLANE, max_size=2, pool="master")
    launched = [i.__class__(**{**vars(i), "launch_time": T0 - timedelta(hours=2)}) for i in workers.instances]
    workers = workers.__class__(**{**vars(workers), "instances": tuple(launched)})
    fresh = {k: v for k, v in nodes_for(workers).items() if k == workers.instances[0].instance_id}
    tick = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")
    world = World(groups={"b": workers, "m": masters}, nodes=fresh, membership_confirmed=confirmed)
    plan = decide(tick, T0, SETTINGS, world)
    terminated = sorted(x.instance_id for x in plan.actions if isinstance(x, Terminate))
    if confirmed:  # the agent's whole list: the two other workers have no node, a master is surplus (cleanup_limit)
        judged = {*(i.instance_id for i in workers.instances[1:]), masters.instances[1].instance_id}
        assert set(terminated) <= judged and len(terminated) == min(SETTINGS.cleanup_limit, 3) > 0
    else:
        assert terminated == []
        assert not [x for x in plan.actions if type(x).__name__ == "SendCommand"]  # no drain either
        assert any(isinstance(x, Note) and x.reason is Reason.MEMBERSHIP_UNAVAILABLE for x in plan.actions)


@pytest.mark.parametrize(
    ("status", "started", "reissued"),
    [
        ("queued", False, True),  # its message never sent or never received: no drain ran by its deadline
        ("timed_out", False, True),  # ended unstarted by the sweeper
        ("timed_out", True, False),  # ran, and the policy's deadline passed: terminated
    ],
)
def test_a_surplus_master_whose_drain_never_ran_is_drained_again_not_terminated(
    status: str, started: bool, reissued: bool
) -> None:
    from datetime import timedelta

    from core.kops import Role
    from lambdas.replenisher.decide.cleanup import latest_surplus
    from lambdas.replenisher.plan import SendDrain

    # ids a Command accepts (``i-`` and hex digits): a drain is recorded for the surplus one
    masters = group("m", "az-a", 2, ids("c", 2), role=Role.CONTROL_PLANE, max_size=2, pool="master")
    surplus = masters.instances[1].instance_id
    deadline = T0 - timedelta(minutes=1)
    item: dict[str, object] = {
        "status": status,
        "instance_id": surplus,
        "command": {"command_id": f"surplus-{surplus}", "deadline": deadline.isoformat()},
    }
    if started:
        item["started_at"] = (deadline - timedelta(minutes=5)).isoformat()
    tick = Event(kind=EventKind.TICK, event_id="t", event_time=T0, source="aws.events", detail_type="Scheduled Event")
    world = World(
        groups={"m": masters},
        nodes=nodes_for(masters),
        membership_confirmed=True,
        commands={f"surplus-{surplus}": item},
    )
    plan = decide(tick, T0, SETTINGS, world)
    terminated = [x.instance_id for x in plan.actions if isinstance(x, Terminate)]
    sent = [(x.command.command_id, x.command.deadline) for x in plan.actions if isinstance(x, SendDrain)]
    if reissued:
        assert terminated == []
        timeout = timedelta(seconds=SETTINGS.giveback_drain_timeout_seconds)
        assert sent == [(f"surplus-{surplus}-2", T0 + timeout)]
    else:
        assert terminated == [surplus] and sent == []
    assert latest_surplus({f"surplus-{surplus}": {}, f"surplus-{surplus}-3": {}, "surplus-x-9": {}}, surplus) == (
        f"surplus-{surplus}-3"
    )
