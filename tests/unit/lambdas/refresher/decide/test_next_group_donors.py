"""The pass that ends a worker group's last step starts the next group's first surge (``lifecycle.start_steps`` runs
after the steps moved on): the compensation donors must have been read for it (``passes.may_start_a_group``, asked of
the run before the pass), else a donor is surged as if its compensation were its own size (``worker.rebase``), and
the replenisher's give-back then takes the unit the run counts on: the group ends one above its own size
(docs/DESIGN.md invariant 4). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.kops import Role
from core.runs import GroupSurge, Run, RunOptions, RunStep, Selection, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.passes import may_start_a_group
from lambdas.refresher.world import GroupFacts, InstanceFacts, World
from tests.unit.lambdas.refresher.decide_world import SETTINGS, T0, caps, node

G, H = "nodes-a", "nodes-b"


def facts(name: str, ids: list[str], desired: int) -> GroupFacts:
    instances = tuple(InstanceFacts(i, launch_template_version="1") for i in ids)
    return GroupFacts(name, Role.NODE, name, 1, 4, desired, instances, "2")


def two_groups(last: StepState) -> Run:
    """``G`` with its last step ``last`` (its old instance gone: the pass ends it), ``H`` not started."""
    return Run(
        run_id="r1",
        cluster="c",
        options=RunOptions(selection=Selection.ALL),
        created_at=T0,
        updated_at=T0,
        groups=[
            GroupSurge(name=G, role="node", min_size=1, original_desired=2, original_max=4, raised=1),
            GroupSurge(name=H, role="node", min_size=1, original_desired=2, original_max=4),
        ],
        steps=[
            RunStep(index=0, group=G, role="node", instance_id="i-01", state=StepState.DONE, note="replaced"),
            RunStep(
                index=1,
                group=G,
                role="node",
                instance_id="i-02",
                state=last,
                intent_at=T0,
                surge_instance_id="i-05",
                command_id="refresh-r1-1",
            ),
            RunStep(index=2, group=H, role="node", instance_id="i-03"),
        ],
    )


def world(donors: frozenset[str]) -> World:
    # H carries one unit for a compensation (its own size 2, desired 3)
    ids = ["i-04", "i-05", "i-03", "i-06", "i-07"]
    groups = {G: facts(G, ["i-04", "i-05"], 2), H: facts(H, ["i-03", "i-06", "i-07"], 3)}
    return World(groups=groups, nodes={i: node(i) for i in ids}, membership_confirmed=True, donors=donors)


def test_the_pass_ending_a_groups_last_step_reads_the_donors_for_the_next_group() -> None:
    r = two_groups(StepState.TERMINATING)
    assert may_start_a_group(r)  # the pass may start H: the COMP# ledgers are read for it
    read = advance(r, world(frozenset({H})), SETTINGS, T0 + timedelta(seconds=60))
    assert not caps(read) and read.run.steps[2].state is StepState.PENDING  # H waits for its give-back
    assert read.run.groups[1].original_desired == 2


def test_a_group_whose_steps_are_pending_or_in_flight_reads_no_donors_for_a_later_group() -> None:
    r = two_groups(StepState.SURGING)
    r.steps.insert(2, RunStep(index=3, group=G, role="node", instance_id="i-08"))
    assert not may_start_a_group(r)  # G still has a step to start: H cannot start in this pass
