"""A worker step's replacement, surge first (rules 1 and 2 of the package docstring): start the steps of the
current worker group up to ``max_surge``, and move a surging step to draining once its spare is Ready. Pure."""

from __future__ import annotations

from core.runs import RunStep, StepState
from lambdas.refresher.decide.context import Context, WaitKind
from lambdas.refresher.plan import SendCommand


def surging(p: Context, step: RunStep) -> None:
    """A surging worker step: redo a raise not visible after the grace period; once a spare is Ready and the group keeps
    ``original_desired`` Ready nodes besides those being replaced, drain the old node (rules 1, 2)."""
    group, facts = p.run.group(step.group), p.facts(step)
    if facts is None or not facts.has_live(step.instance_id):
        step.state = StepState.UNDOING
        step.note = "the old instance left its group (interrupted or removed): surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
        return
    if p.run.status.stopping:
        step.state = StepState.UNDOING
        step.note = f"run {p.run.status.value}: surge given back"
        p.change(f"step {step.index} undoing: {step.note}")
        return
    expected = group.original_desired + group.raised
    if facts.desired < expected:
        if p.older_than_grace(step.intent_at):
            step.intent_at = p.now
            p.add_capacity_effect(p.capacity(group))
            p.change(
                f"step {step.index}: desired capacity of {group.name} is {facts.desired}, raise it again to {expected}"
            )
        else:
            p.wait(WaitKind.EFFECT, f"{group.name} desired capacity to reach {expected}")
        return
    spares = p.new_instances(step, facts)
    ready = [iid for iid in spares if p.world.ready(iid)]
    exclude = p.olds_being_replaced(step.group) | {step.instance_id}
    if ready and p.ready_besides(facts, exclude) >= group.original_desired:
        step.surge_instance_id = ready[0]
        step.command_id = p.command_id(step)
        step.state = StepState.DRAINING
        step.intent_at = p.now
        p.effects.append(SendCommand(p.drain_command(step)))
        p.change(f"step {step.index}: spare {ready[0]} Ready, drain {step.instance_id}")
    elif ready:
        p.wait(
            WaitKind.NODE_READY,
            f"{group.name} to have {group.original_desired} Ready nodes besides those being replaced",
        )
    elif spares:
        p.wait(WaitKind.NODE_READY, f"spare {spares[0]} of {group.name} to be Ready")
    else:
        p.wait(WaitKind.LAUNCH, f"{group.name} to launch a spare for {step.instance_id}")


def start_workers(p: Context, current: str, steps: list[RunStep]) -> None:
    """Start the pending steps of worker group ``current`` while fewer than ``max_surge`` are in flight: raise its
    desired capacity by one each (a step whose instance left the group is skipped)."""
    group = p.run.group(current)
    in_flight = sum(1 for s in steps if s.state.in_flight)
    facts = p.world.groups.get(current)
    for step in steps:
        if in_flight >= p.run.options.max_surge:
            break
        if step.state is not StepState.PENDING:
            continue
        if facts is None or not facts.has_live(step.instance_id):
            p.finish_step(step, StepState.SKIPPED, "no longer in its group")
            continue
        group.raised += 1
        step.state = StepState.SURGING
        step.started_at = step.intent_at = p.now
        step.surge_baseline = sorted(i.instance_id for i in facts.instances)
        p.add_capacity_effect(p.capacity(group))
        p.change(
            f"step {step.index}: surge {group.name} to {group.original_desired + group.raised} for {step.instance_id}"
        )
        in_flight += 1
