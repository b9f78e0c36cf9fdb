"""``Run.working_copy``: the copy a refresher pass changes is as independent of the run it was taken from as a deep
copy, and every field that holds a list or a map is one it copies."""

from datetime import UTC, datetime, timedelta
from typing import Any, get_origin

from pydantic import BaseModel

from core.runs import MUTABLE_STEP_FIELDS, GroupSurge, Run, RunOptions, RunStatus, RunStep, StepState

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def containers(model: type[BaseModel]) -> set[str]:
    """The fields whose declared type is a list, a map or a set (the ones a shallow copy would share)."""
    return {name for name, f in model.model_fields.items() if get_origin(f.annotation) in (list, dict, set)}


def test_every_list_or_map_field_is_one_the_copy_copies() -> None:
    # a new list or map field must be copied by working_copy (and named here) or a pass would change the run it read
    assert containers(RunStep) == set(MUTABLE_STEP_FIELDS)
    assert containers(Run) == {"groups", "steps"}
    assert containers(GroupSurge) == set()
    assert RunOptions.model_config.get("frozen") is True


def run() -> Run:
    step: dict[str, Any] = {
        "index": 0,
        "group": "nodes",
        "role": "node",
        "instance_id": "i-old",
        "state": StepState.SURGING,
        "surge_baseline": ["i-a", "i-b"],
        "waiting_since": {"spare_launch": T0},
        "entered": {"surging": T0},
    }
    return Run(
        run_id="20240305T100000Z-abcdef",
        cluster="demo",
        options=RunOptions(instance_groups=("nodes",)),
        groups=[GroupSurge(name="nodes", role="node", min_size=1, original_desired=2, original_max=3, raised=1)],
        steps=[RunStep(**step), RunStep(**{**step, "index": 1, "instance_id": "i-old2"})],
        created_at=T0,
        updated_at=T0,
    )


def test_changing_the_copy_leaves_the_run_as_it_was() -> None:
    original = run()
    before = original.model_copy(deep=True)
    copied = original.working_copy()
    assert copied == before and copied.model_fields_set == before.model_fields_set
    step = copied.steps[0]
    step.surge_baseline.append("i-c")
    step.waiting_since["spare_ready"] = T0 + timedelta(minutes=1)
    step.entered["draining"] = T0
    step.state = StepState.DRAINING
    copied.steps[1].surge_baseline.clear()
    copied.steps.append(step.model_copy(update={"index": 2}))
    copied.groups[0].raised = 0
    copied.groups.append(copied.groups[0].model_copy(update={"name": "other"}))
    copied.status = RunStatus.PAUSING
    assert original == before
    assert [s.model_fields_set for s in original.steps] == [s.model_fields_set for s in before.steps]


def test_steps_at_rest_are_shared_and_those_in_flight_copied() -> None:
    # a decision never changes a step final when its pass starts, and copies a pending one before it changes it
    # (``Context.own``; tests/unit/lambdas/refresher/decide/test_final_steps.py): the copy shares those, and copies
    # every step in flight
    original = run()
    original.steps[1] = original.steps[1].model_copy(update={"state": StepState.DONE})
    original.steps.append(original.steps[0].model_copy(update={"index": 2, "state": StepState.PENDING}))
    copied = original.working_copy()
    assert copied == original
    assert copied.steps[1] is original.steps[1] and copied.steps[2] is original.steps[2]
    assert copied.steps[0] is not original.steps[0]
    assert copied.steps[0].waiting_since is not original.steps[0].waiting_since


def test_final_and_in_flight_name_the_documented_states() -> None:
    final = {StepState.DONE, StepState.UNDONE, StepState.KEPT, StepState.SKIPPED, StepState.FAILED}
    assert {s for s in StepState if s.final} == final
    assert {s for s in StepState if s.in_flight} == set(StepState) - final - {StepState.PENDING}
