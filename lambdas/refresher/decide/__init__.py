"""The next step of a refresh run: run + world + clock + settings -> a decision. Pure: no I/O, no clock reads.

Level-triggered: every call looks at the whole run and the whole world, so it does not matter which event (a drain
finishing, an instance launching, the tick) caused it, or whether an earlier invocation crashed.

**Order.** Control-plane steps first, one at a time and never surged; each starts only while every master is Ready,
terminates its drained master only while every other master still is (``replace.masters_ready_besides``: one may go
NotReady during the drain), and ends only once every master is Ready on two checks ``master_settle_seconds`` apart
after the replacement. Then worker groups one after the other; within a group up to ``max_surge`` steps at once.

**Worker step** (surge first, max unavailable 0):

1. ``pending -> surging``: desired capacity is raised to ``original_desired + raised`` (MaxSize too if needed),
   after recording the intent and the group's current instances (``surge_baseline``, dropped once the step is
   final).
2. ``surging -> draining``: once a new instance of the group (not in the baseline, not another step's spare) has a
   Ready node *and* the group has at least ``original_desired`` Ready instances besides the old ones being
   replaced, the old node is drained through the agent (a ``drain`` command, deadline now + drain timeout,
   ``uncordon_on_failure`` under the ``pause`` policy). No spare yet: the run waits; it never removes capacity.
3. ``draining -> terminating``: when the drain succeeded (or was skipped: no node), or timed out under the
   ``terminate`` policy, and the group still has ``original_desired`` Ready instances besides the old ones: the old
   instance is terminated with ShouldDecrementDesiredCapacity=True, which gives the surge unit back; or, when the
   group has a pending step that may start now (run running, canary done, within ``max_surge``, its instance live),
   without decrement: the unit is handed to that step, which starts surging with no raise, Auto Scaling's
   replacement being its spare (``handover``).
4. ``terminating -> done`` once the instance left the group (``raised`` - 1; unchanged after a hand-over). An old
   instance that left by other means (Spot reclaimed it while it drained or before the termination reached it:
   desired capacity was not decremented) also ends the step ``done`` with its spare kept, and the unit is given
   back once: desired capacity lowered while Auto Scaling has launched nothing for it, else Auto Scaling's
   replacement given back as a surge is (``replace.left_group``). A group at MinSize (kOps raised it under the
   surge) refuses a decrement: the old instance goes without it (Auto Scaling launches its replacement), a spare
   being given back is kept, and the unit counts as the group's own (``original_desired`` + 1): desired capacity
   ends at kOps' MinSize, and the refused call is not resent (``replace.decrementable``, ``undo.absorb``).

A drain that failed, or timed out under ``pause``, pauses the run: an uncordon command is sent for the old node
(belt and braces beside ``uncordon_on_failure``) and the step gives its surge back (``undoing``): the spare is
drained (its pods go back to the old node, uncordoned) then terminated with decrement; a spare that has no node yet
(absent from a confirmed membership) is terminated at once; a surge that launched nothing is lowered back (only when
the group holds no more instances than the lower value, so Auto Scaling has nothing to pick; counted given
back only once a later pass reads the lower value back, as a MaxSize restore is). The undo's own drain
proceeds to the termination whatever its outcome (the spare is the run's own capacity), unless it never ran (expired
unstarted, or started only at its deadline): then it is sent again under a new id. Each give-back reads desired
capacity back first: at most ``original_desired + raised - 1`` (kOps lowered MaxSize under the surge, Auto Scaling
clamped desired capacity and removed an instance of its choosing), the unit is counted given back and nothing is
terminated, the spare kept (uncordoned when the undo drained it): a termination with decrement would remove a second
instance.

**Deadlines** (``core.runs.WaitDeadline``, seconds from ``RefresherSettings``): a surging step waits for its spare
to launch, then to register, then to be Ready, then for the group's other nodes to be Ready (entering one ends those
before it: ``RunStep.waiting_since`` holds the waits in progress); a draining step for the group's nodes before the
termination; a master step for every master to be Ready before it starts, before it terminates its drained master
and after the replacement; a group carrying a compensation to be given back before its first surge. Past a deadline
the run pauses with the reason and the step gives its surge back (a spare that launched but never registered is
terminated with decrement; a drained old node is uncordoned); a master whose masters are not Ready in time is
``failed`` after its replacement, ``kept`` (uncordoned) before its termination. Pending steps of a paused run are
skipped; MaxSize is restored; the lock is released. Giving capacity back has its own (``give_back``): a step waiting
for Auto Scaling to launch what it would give back, for a lowering to read back, or for its spare to leave after its
termination, and a group's MaxSize restore; past it nothing more is asked or terminated, the unit or MaxSize is left
raised and recorded (``GroupSurge.unreturned``, ``max_left``), the step is ``failed``, and the run ends ``failed``,
its reason naming each group and what is left raised (``undo.give_back_overdue``).

**Canary.** Until one step of the run is ``done``, no second step starts (whatever ``max_surge``): a replacement
that never becomes Ready pauses the run before it touches another instance.

**Sizes re-read.** A worker group's first surge counts from its sizes as read then (not those recorded at the
run's start: kOps or a compensation may have changed them).

**Cancel** (``cancel_requested``): steps not started are skipped, steps still surging give their surge back, steps
draining or terminating finish; then the run ends ``cancelled``.

**Redo.** An intent whose effect is not visible is redone once it is older than ``effect_grace_seconds`` (an
invocation crashed between the record and the effect): desired capacity is set again (an absolute value), a command
not recorded is sent again, an instance still in service is terminated again. Effects visible are only recorded.
A surge's raise is redone only within its ``spare_launch`` deadline; a group whose MaxSize is read lower than the
surge needs and than the run found it was reset (by kOps or a person): the run pauses with that reason and the
step gives its surge back, MaxSize is not raised against the reset.

**Waiting.** The decision says what the run waits for; waits on a node becoming Ready, a launch, a termination or
the masters' second check are worth polling for a while inside the invocation; a wait on a drain is not (the
agent's event ends it). A launch and a node becoming Ready have an event too (the agent's "Node Ready" of the spare):
they are polled only slowly (``Decision.evented``). A surge records its spare's launch wait itself.

Modules: ``context`` (the pass's state and helpers, ``Decision``), ``worker`` (surge and start of worker steps),
``master`` (control-plane steps), ``replace`` (drain outcome, termination), ``handover`` (a drained step's surge
unit to the next step), ``undo`` (giving a surge back),
``lifecycle`` (one pass: stop, steps, groups' MaxSize, the run's end).
"""

from __future__ import annotations

from datetime import datetime

from core.runs import Run, StepState
from core.settings import RefresherSettings
from lambdas.refresher.decide.context import Context, Decision
from lambdas.refresher.decide.lifecycle import decide_pass
from lambdas.refresher.world import World


def advance(
    run: Run, world: World, settings: RefresherSettings, now: datetime, states: list[StepState] | None = None
) -> Decision:
    """Decide the run's next step (rules in the module docstring).

    Args:
        run: the run as stored (its ``version`` conditions the save).
        world: groups (all of the cluster's, for the masters' check), fresh membership, the run's commands, lock.
        settings: grace periods, settle interval, agent grace.
        now: the current time (UTC).
        states: ``[s.state for s in run.steps]``, when the caller has them (read once a pass: ``advance_run``).

    Returns:
        The decision: the new run state (saved first when it changed), the effects, and what it waits for.
    """
    return decide_pass(Context(run, world, settings, now, states))
