"""An uncordon the run sends for a node it drained and keeps (``replace.give_up``: a drain that ended but the step
cannot go on; ``undo.taken_back``: a spare kept) is the only thing that gives that cordon back: the drain succeeded,
so its ``uncordon_on_failure`` does nothing, and no later pass looks at the step again. A message lost (SQS refusing
the send after the ``RUN#`` save recorded the command; the invocation ending between the two) is sent again by the
command sweeper only while the command's deadline has not passed (``lambdas.common.sweep.stranded``: a ``queued``
item is sent again ``COMMAND_SWEEP_SECONDS`` after it was, on the replenisher's tick, and expired past its deadline).
A deadline of 120 s was always expired first: the node stayed cordoned on a running instance (docs/DESIGN.md
invariant 6). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.model import CommandKind
from core.runs import StepState, WaitDeadline
from core.settings import ReplenisherSettings
from lambdas.common.sweep import stranded
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world

TICK = 120  # the replenisher's schedule (infra), whose tick sweeps


def test_a_lost_uncordon_of_a_kept_node_is_sent_again_by_the_sweeper_not_expired() -> None:
    # the old node drained, Auto Scaling keeps refusing its termination past the termination deadline: it is kept
    r = run(StepState.TERMINATING, 1, T0, surge_instance_id=SPARE, command_id="refresh-r1-0")
    r.steps[0].waiting_since[WaitDeadline.TERMINATION.value] = T0
    late = T0 + timedelta(seconds=SETTINGS.deadline_seconds(WaitDeadline.TERMINATION) + 1)
    decision = advance(r, world([OLD, OTHER, SPARE], 3), SETTINGS, late)
    (uncordon,) = [s.command for s in effects(decision, SendCommand) if s.command.kind is CommandKind.UNCORDON]
    assert uncordon.instance_id == OLD
    item = {
        "sk": f"CMD#{uncordon.command_id}",
        "command": uncordon.model_dump(mode="json"),
        "status": "queued",
        "created_at": late.isoformat(),
    }
    after = ReplenisherSettings(cluster_name="c", table_name="t", queue_url="q").command_sweep_seconds
    sweep = stranded([item], late + timedelta(seconds=after + TICK), after)
    assert [c.command_id for c in sweep.resend] == [uncordon.command_id] and not sweep.expire
