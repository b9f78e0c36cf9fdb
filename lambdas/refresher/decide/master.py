"""A control-plane step: one at a time, never surged, started only while every master is Ready (and its drained
master terminated only while every other is: ``replace.masters_ready_besides``), ended once every
master is Ready on two checks ``master_settle_seconds`` apart. Each wait has its deadline (``nodes_ready`` before
the start, ``master_ready`` after the replacement); past it the run pauses. Pure."""

from __future__ import annotations

from core.runs import RunStep, StepState, WaitDeadline
from lambdas.refresher.decide.context import Context, WaitKind
from lambdas.refresher.plan import Metric, SendCommand
from lambdas.refresher.select import masters_not_ready


def start_master(p: Context, step: RunStep) -> None:
    """Start a master step while every master is Ready: drain it (masters are never surged)."""
    step = p.own(step)  # a pending step: the run read's until this pass copies it
    facts = p.facts(step)
    if facts is None or not facts.has_live(step.instance_id):
        p.finish_step(step, StepState.SKIPPED, "no longer in its group")
        return
    problems = masters_not_ready(p.world)
    if problems:
        what = "masters to be Ready before the next: " + "; ".join(problems)
        if not p.overdue(step, WaitDeadline.NODES_READY, what):
            p.wait(WaitKind.NODE_READY, what)
        return  # overdue: the run pauses before touching this master
    p.end_wait(step, WaitDeadline.NODES_READY)
    step.state = StepState.DRAINING
    step.started_at = step.intent_at = p.now
    step.command_id = p.command_id(step)
    step.node_name = p.node_name(step.instance_id, step)
    p.effects.append(SendCommand(p.drain_command(step)))
    p.change(f"step {step.index}: all masters Ready, drain master {step.instance_id}")


def settling(p: Context, step: RunStep) -> None:
    """A replaced master: done once every master is Ready on two checks ``master_settle_seconds`` apart."""
    problems = masters_not_ready(p.world)
    if problems:
        if step.settle_first_ok_at is not None:
            step.settle_first_ok_at = None
            p.change(f"step {step.index}: masters not Ready any more")
        what = "masters to be Ready: " + "; ".join(problems)
        if p.overdue(step, WaitDeadline.MASTER_READY, what):
            p.finish_step(step, StepState.FAILED, f"{WaitDeadline.MASTER_READY.value} deadline passed: {what}")
            p.effects.append(Metric("NodesReplacementFailed"))
        else:
            p.wait(WaitKind.NODE_READY, what)
        return
    p.end_wait(step, WaitDeadline.MASTER_READY)
    settle = p.settings.master_settle_seconds
    if step.settle_first_ok_at is None:
        step.settle_first_ok_at = p.now
        p.change(f"step {step.index}: all masters Ready (first check)")
        p.wait(WaitKind.SETTLE, "the second check of the masters", after=settle)
        return
    waited = (p.now - step.settle_first_ok_at).total_seconds()
    if waited >= settle:
        p.finish_step(step, StepState.DONE, "replaced; all masters Ready on two checks")
        p.effects.append(Metric("NodesReplaced"))
    else:
        p.wait(WaitKind.SETTLE, "the second check of the masters", after=settle - waited)
