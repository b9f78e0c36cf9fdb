"""The next step of a refresh run: run + world + clock + settings -> a decision. Pure: no I/O, no clock reads.

Level-triggered: every call looks at the whole run and the whole world, so it does not matter which event (a drain
finishing, an instance launching, the tick) caused it, or whether an earlier invocation crashed.

**Order.** Control-plane steps first, one at a time and never surged; each starts only while every master is
Ready, and ends only once every master is Ready on two checks ``master_settle_seconds`` apart after the
replacement. Then worker groups one after the other; within a group up to ``max_surge`` steps at once.

**Worker step** (surge first, max unavailable 0):

1. ``pending -> surging``: desired capacity is raised to ``original_desired + raised`` (MaxSize too if needed),
   after recording the intent and the group's current instances (``surge_baseline``).
2. ``surging -> draining``: once a new instance of the group (not in the baseline, not another step's spare) has a
   Ready node *and* the group has at least ``original_desired`` Ready instances besides the old ones being
   replaced, the old node is drained through the agent (a ``drain`` command, deadline now + drain timeout,
   ``uncordon_on_failure`` under the ``pause`` policy). No spare yet: the run waits; it never removes capacity.
3. ``draining -> terminating``: when the drain succeeded (or was skipped: no node), or timed out under the
   ``terminate`` policy, and the group still has ``original_desired`` Ready instances besides the old ones: the old
   instance is terminated with ShouldDecrementDesiredCapacity=True, which gives the surge unit back.
4. ``terminating -> done`` once the instance left the group (``raised`` - 1).

A drain that failed, or timed out under ``pause``, pauses the run: an uncordon command is sent for the old node
(belt and braces beside ``uncordon_on_failure``) and the step gives its surge back (``undoing``): the spare is
drained (its pods go back to the old node, uncordoned) then terminated with decrement; a spare that has no node
yet is terminated at once; a surge that launched nothing is lowered back (only when the group holds no more
instances than the lower value, so Auto Scaling has nothing to pick). The undo's own drain proceeds to the
termination whatever its outcome: the spare is the run's own capacity.

**Cancel** (``cancel_requested``): steps not started are skipped, steps still surging give their surge back, steps
draining or terminating finish; then the run ends ``cancelled``.

**Redo.** An intent whose effect is not visible is redone once it is older than ``effect_grace_seconds`` (an
invocation crashed between the record and the effect): desired capacity is set again (an absolute value), a command
not recorded is sent again, an instance still in service is terminated again. Effects visible are only recorded.

**Waiting.** The decision says what the run waits for; waits on a node becoming Ready, a launch, a termination or
the masters' second check are worth polling for a while inside the invocation; a wait on a drain is not (the
agent's event ends it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum

from core.kops import Role
from core.model import Command, CommandKind, CommandStatus, DrainOptions
from core.runs import DrainTimeoutPolicy, GroupSurge, Run, RunStatus, RunStep, StepState
from core.settings import RefresherSettings
from lambdas.refresher.plan import (
    Action,
    Metric,
    MetricUnitName,
    ReleaseLock,
    SaveRun,
    SendCommand,
    SetCapacity,
    TerminateInstance,
)
from lambdas.refresher.select import masters_not_ready
from lambdas.refresher.world import GroupFacts, World

UNDO_COMMAND_SUFFIX = "undo"
UNCORDON_COMMAND_SUFFIX = "uncordon"
UNDO_DRAIN_SECONDS = 300  # deadline of the drain of a spare being given back


class WaitKind(str, Enum):
    DRAIN = "drain"  # the agent's result event ends it: return
    NODE_READY = "node_ready"
    LAUNCH = "launch"
    TERMINATION = "termination"
    SETTLE = "settle"
    EFFECT = "effect"  # an intent younger than the grace period: its invocation is probably still at it

    @property
    def pollable(self) -> bool:
        return self is not WaitKind.DRAIN


@dataclass(frozen=True)
class Wait:
    kind: WaitKind
    what: str
    after_seconds: float | None = None  # poll again no sooner than this (masters' second check)


@dataclass
class Decision:
    """What to do now.

    Attributes:
        run: the run's new state (the input's when nothing changed).
        actions: ``SaveRun`` first when the run changed, then the effects, in order.
        waits: what the run waits for afterwards (empty when it is over or moves on at once).
    """

    run: Run
    actions: list[Action] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(isinstance(a, SaveRun) for a in self.actions)

    @property
    def pollable(self) -> Wait | None:
        """The wait worth polling for, if every wait is (a drain in flight makes polling pointless)."""
        if not self.waits or any(not w.kind.pollable for w in self.waits):
            return None
        return min(self.waits, key=lambda w: w.after_seconds or 0)


class _Pass:
    """One decision pass: a mutable copy of the run plus the effects and notes gathered."""

    def __init__(self, run: Run, world: World, settings: RefresherSettings, now: datetime) -> None:
        self.run = run.model_copy(deep=True)
        self.world = world
        self.settings = settings
        self.now = now
        self.effects: list[Action] = []
        self.changes: list[str] = []
        self.waits: list[Wait] = []

    # -- helpers -------------------------------------------------------------------------------------------

    def change(self, note: str) -> None:
        self.changes.append(note)

    def wait(self, kind: WaitKind, what: str, after: float | None = None) -> None:
        self.waits.append(Wait(kind, what, after))

    def older_than_grace(self, when: datetime | None) -> bool:
        return when is None or (self.now - when).total_seconds() >= self.settings.effect_grace_seconds

    def facts(self, step: RunStep) -> GroupFacts | None:
        return self.world.groups.get(step.group)

    def command_id(self, step: RunStep, suffix: str = "") -> str:
        base = f"refresh-{self.run.run_id}-{step.index}"
        return f"{base}-{suffix}" if suffix else base

    def command(
        self,
        step: RunStep,
        kind: CommandKind,
        instance_id: str,
        node_name: str | None,
        command_id: str,
        seconds: int,
        uncordon_on_failure: bool = False,
    ) -> Command:
        return Command(
            command_id=command_id,
            cluster=self.run.cluster,
            kind=kind,
            instance_id=instance_id,
            node_name=node_name,
            reason=f"refresh {self.run.run_id} step {step.index}",
            deadline=self.now + timedelta(seconds=seconds),
            options=DrainOptions(uncordon_on_failure=uncordon_on_failure),
        )

    def drain_command(self, step: RunStep) -> Command:
        pause = self.run.options.drain_timeout_policy is DrainTimeoutPolicy.PAUSE
        return self.command(
            step,
            CommandKind.DRAIN,
            step.instance_id,
            self.node_name(step.instance_id, step),
            step.command_id or self.command_id(step),
            self.run.options.drain_timeout_seconds,
            uncordon_on_failure=pause,
        )

    def unsent(self, command_id: str) -> bool:
        """The command may never have reached the queue: not recorded, or still ``queued`` (a crash between the
        record and the send). Sending it again is harmless: the agent works a command once, by its ``CMD#``."""
        item = self.world.commands.get(command_id)
        return item is None or item.get("status") == CommandStatus.QUEUED.value

    def node_name(self, instance_id: str, step: RunStep | None = None) -> str | None:
        record = self.world.nodes.get(instance_id)
        if record is not None:
            return record.node_name
        return step.node_name if step is not None and step.instance_id == instance_id else None

    def capacity(self, group: GroupSurge) -> SetCapacity:
        desired = group.original_desired + group.raised
        max_size = None
        if desired > group.original_max:
            max_size = desired
            group.max_raised_to = max(group.max_raised_to or 0, desired)
        return SetCapacity(group.name, desired=desired, max_size=max_size)

    def add_capacity_effect(self, effect: SetCapacity) -> None:
        """Only the last desired value for a group matters (absolute values): replace an earlier one."""
        self.effects = [
            e
            for e in self.effects
            if not (isinstance(e, SetCapacity) and e.asg_name == effect.asg_name and e.desired is not None)
        ]
        self.effects.append(effect)

    def olds_being_replaced(self, group: str) -> set[str]:
        return {
            s.instance_id
            for s in self.run.steps
            if s.group == group and s.state in (StepState.DRAINING, StepState.TERMINATING)
        }

    def ready_besides(self, facts: GroupFacts, exclude: set[str]) -> int:
        return sum(1 for i in facts.live if i.instance_id not in exclude and self.world.ready(i.instance_id))

    def claimed_spares(self, but: RunStep) -> set[str]:
        return {
            s.surge_instance_id for s in self.run.steps if s is not but and s.surge_instance_id and s.state.in_flight
        }

    def new_instances(self, step: RunStep, facts: GroupFacts) -> list[str]:
        olds = {s.instance_id for s in self.run.steps}
        claimed = self.claimed_spares(step)
        return [
            i.instance_id
            for i in facts.live
            if i.instance_id not in step.surge_baseline and i.instance_id not in claimed and i.instance_id not in olds
        ]

    def finish_step(self, step: RunStep, state: StepState, note: str = "") -> None:
        step.state = state
        step.finished_at = self.now
        if note:
            step.note = note
        self.change(f"step {step.index} ({step.instance_id}) {state.value}" + (f": {note}" if note else ""))

    def stop_run(self, status: RunStatus, reason: str) -> None:
        if self.run.status is RunStatus.RUNNING:
            self.run.status = status
            self.run.reason = reason
            self.change(f"run {status.value}: {reason}")

    # -- step handlers -------------------------------------------------------------------------------------

    def surging(self, step: RunStep) -> None:
        group, facts = self.run.group(step.group), self.facts(step)
        if facts is None or not facts.has_live(step.instance_id):
            step.state = StepState.UNDOING
            step.note = "the old instance left its group (interrupted or removed): surge given back"
            self.change(f"step {step.index} undoing: {step.note}")
            return
        if self.run.status.stopping:
            step.state = StepState.UNDOING
            step.note = f"run {self.run.status.value}: surge given back"
            self.change(f"step {step.index} undoing: {step.note}")
            return
        expected = group.original_desired + group.raised
        if facts.desired < expected:
            if self.older_than_grace(step.intent_at):
                step.intent_at = self.now
                self.add_capacity_effect(self.capacity(group))
                self.change(
                    f"step {step.index}: desired capacity of {group.name} is {facts.desired}, "
                    f"raise it again to {expected}"
                )
            else:
                self.wait(WaitKind.EFFECT, f"{group.name} desired capacity to reach {expected}")
            return
        spares = self.new_instances(step, facts)
        ready = [iid for iid in spares if self.world.ready(iid)]
        exclude = self.olds_being_replaced(step.group) | {step.instance_id}
        if ready and self.ready_besides(facts, exclude) >= group.original_desired:
            step.surge_instance_id = ready[0]
            step.command_id = self.command_id(step)
            step.state = StepState.DRAINING
            step.intent_at = self.now
            self.effects.append(SendCommand(self.drain_command(step)))
            self.change(f"step {step.index}: spare {ready[0]} Ready, drain {step.instance_id}")
        elif ready:
            self.wait(
                WaitKind.NODE_READY,
                f"{group.name} to have {group.original_desired} Ready nodes besides those being replaced",
            )
        elif spares:
            self.wait(WaitKind.NODE_READY, f"spare {spares[0]} of {group.name} to be Ready")
        else:
            self.wait(WaitKind.LAUNCH, f"{group.name} to launch a spare for {step.instance_id}")

    def _drain_outcome(self, step: RunStep, command_id: str) -> tuple[str | None, str]:
        """The drain's terminal status ("" message) or None while it runs; a command unfinished long after its
        deadline counts as timed out (the agent is gone)."""
        item = self.world.commands.get(command_id)
        if item is None:
            return None, ""
        status = CommandStatus(item["status"])
        if status.terminal:
            result = item.get("result") or {}
            return status.value, str(result.get("message", ""))
        deadline = datetime.fromisoformat(str(item["command"]["deadline"]))
        if (self.now - deadline).total_seconds() > self.settings.agent_grace_seconds:
            return CommandStatus.TIMED_OUT.value, "no result from the agent after the deadline"
        return None, ""

    def draining(self, step: RunStep) -> None:
        assert step.command_id is not None
        facts = self.facts(step)
        worker = step.role == Role.NODE.value
        if worker and (facts is None or not facts.has_live(step.instance_id)):
            step.state = StepState.UNDOING
            step.note = "the old instance left its group during the drain: surge given back"
            self.change(f"step {step.index} undoing: {step.note}")
            return
        if self.unsent(step.command_id):
            if self.older_than_grace(step.intent_at):
                step.intent_at = self.now
                self.effects.append(SendCommand(self.drain_command(step)))
                self.change(f"step {step.index}: drain command {step.command_id} not taken up, send it again")
            else:
                self.wait(WaitKind.EFFECT, f"the agent to take drain command {step.command_id} up")
            return
        status, message = self._drain_outcome(step, step.command_id)
        if status is None:
            self.wait(WaitKind.DRAIN, f"drain of {step.node_name or step.instance_id}")
            return
        proceed = status in (CommandStatus.SUCCEEDED.value, CommandStatus.SKIPPED.value) or (
            status == CommandStatus.TIMED_OUT.value
            and self.run.options.drain_timeout_policy is DrainTimeoutPolicy.TERMINATE
        )
        if step.drain_status != status:
            step.drain_status, step.drain_message = status, message
        if not proceed:
            who = step.node_name or step.instance_id
            self.stop_run(RunStatus.PAUSING, f"drain of {who} {status}: {message}".rstrip(": "))
            step.uncordon_command_id = self.command_id(step, UNCORDON_COMMAND_SUFFIX)
            self.effects.append(
                SendCommand(
                    self.command(
                        step,
                        CommandKind.UNCORDON,
                        step.instance_id,
                        self.node_name(step.instance_id, step),
                        step.uncordon_command_id,
                        120,
                    )
                )
            )
            if worker:
                step.state = StepState.UNDOING
                step.note = f"drain {status}: node uncordoned, surge given back"
                self.change(f"step {step.index} undoing: {step.note}")
            else:
                self.finish_step(step, StepState.KEPT, f"drain {status}: master kept and uncordoned")
            return
        if worker:
            group = self.run.group(step.group)
            assert facts is not None
            exclude = self.olds_being_replaced(step.group)
            if self.ready_besides(facts, exclude) < group.original_desired:
                self.wait(
                    WaitKind.NODE_READY,
                    f"{group.name} to have {group.original_desired} Ready nodes "
                    f"besides those being replaced before terminating {step.instance_id}",
                )
                return
        step.state = StepState.TERMINATING
        step.intent_at = self.now
        self.effects.append(TerminateInstance(step.group, step.instance_id, decrement=worker))
        self.change(f"step {step.index}: drain {status}, terminate {step.instance_id}")

    def terminating(self, step: RunStep) -> None:
        facts = self.facts(step)
        if facts is None or not facts.has_live(step.instance_id):
            if step.role == Role.NODE.value:
                self.run.group(step.group).raised -= 1
                self.finish_step(step, StepState.DONE, "replaced")
                self.effects.append(Metric("NodesReplaced"))
            else:
                step.state = StepState.SETTLING
                step.settle_first_ok_at = None
                self.change(f"step {step.index}: master {step.instance_id} gone, wait for the masters to settle")
            return
        if self.older_than_grace(step.intent_at):
            step.intent_at = self.now
            self.effects.append(TerminateInstance(step.group, step.instance_id, decrement=step.role == Role.NODE.value))
            self.change(f"step {step.index}: {step.instance_id} still in service, terminate it again")
        else:
            self.wait(WaitKind.TERMINATION, f"{step.instance_id} to leave {step.group}")

    def settling(self, step: RunStep) -> None:
        problems = masters_not_ready(self.world)
        if problems:
            if step.settle_first_ok_at is not None:
                step.settle_first_ok_at = None
                self.change(f"step {step.index}: masters not Ready any more")
            self.wait(WaitKind.NODE_READY, "masters to be Ready: " + "; ".join(problems))
            return
        settle = self.settings.master_settle_seconds
        if step.settle_first_ok_at is None:
            step.settle_first_ok_at = self.now
            self.change(f"step {step.index}: all masters Ready (first check)")
            self.wait(WaitKind.SETTLE, "the second check of the masters", after=settle)
            return
        waited = (self.now - step.settle_first_ok_at).total_seconds()
        if waited >= settle:
            self.finish_step(step, StepState.DONE, "replaced; all masters Ready on two checks")
            self.effects.append(Metric("NodesReplaced"))
        else:
            self.wait(WaitKind.SETTLE, "the second check of the masters", after=settle - waited)

    def undoing(self, step: RunStep) -> None:
        group, facts = self.run.group(step.group), self.facts(step)
        if facts is None:
            group.raised -= 1
            self.finish_step(step, StepState.UNDONE, f"group {step.group} is gone")
            return
        spare = step.surge_instance_id
        if spare is None or not facts.has_live(spare):
            candidates = self.new_instances(step, facts)
            if candidates:
                # a spare without a node first: nothing to drain
                candidates.sort(key=lambda iid: iid in self.world.nodes)
                step.surge_instance_id = candidates[0]
                spare = candidates[0]
                self.change(f"step {step.index}: give back spare {spare}")
            else:
                target = group.original_desired + group.raised - 1
                if facts.desired <= target:
                    group.raised -= 1
                    self.finish_step(step, StepState.UNDONE, step.note or "surge given back")
                elif len(facts.live) <= target:
                    group.raised -= 1
                    self.add_capacity_effect(SetCapacity(group.name, desired=target))
                    self.finish_step(
                        step,
                        StepState.UNDONE,
                        (step.note or "surge given back") + f"; nothing launched, desired lowered to {target}",
                    )
                else:
                    self.wait(WaitKind.LAUNCH, f"a spare of {group.name} to give back")
                return
        if spare in self.world.nodes:
            step.undo_command_id = self.command_id(step, UNDO_COMMAND_SUFFIX)
            step.state = StepState.UNDO_DRAINING
            step.intent_at = self.now
            self.effects.append(
                SendCommand(
                    self.command(
                        step, CommandKind.DRAIN, spare, self.node_name(spare), step.undo_command_id, UNDO_DRAIN_SECONDS
                    )
                )
            )
            self.change(f"step {step.index}: drain spare {spare} before giving it back")
        else:
            step.state = StepState.UNDO_TERMINATING
            step.intent_at = self.now
            self.effects.append(TerminateInstance(step.group, spare, decrement=True))
            self.change(f"step {step.index}: spare {spare} has no node, terminate it with decrement")

    def undo_draining(self, step: RunStep) -> None:
        assert step.undo_command_id is not None and step.surge_instance_id is not None
        if self.unsent(step.undo_command_id):
            if self.older_than_grace(step.intent_at):
                step.intent_at = self.now
                self.effects.append(
                    SendCommand(
                        self.command(
                            step,
                            CommandKind.DRAIN,
                            step.surge_instance_id,
                            self.node_name(step.surge_instance_id),
                            step.undo_command_id,
                            UNDO_DRAIN_SECONDS,
                        )
                    )
                )
                self.change(f"step {step.index}: undo drain not recorded, send it again")
            else:
                self.wait(WaitKind.EFFECT, f"undo drain {step.undo_command_id} to be recorded")
            return
        status, _ = self._drain_outcome(step, step.undo_command_id)
        if status is None:
            self.wait(WaitKind.DRAIN, f"drain of spare {step.surge_instance_id}")
            return
        step.state = StepState.UNDO_TERMINATING
        step.intent_at = self.now
        self.effects.append(TerminateInstance(step.group, step.surge_instance_id, decrement=True))
        self.change(f"step {step.index}: spare drain {status}, terminate {step.surge_instance_id} with decrement")

    def undo_terminating(self, step: RunStep) -> None:
        assert step.surge_instance_id is not None
        facts = self.facts(step)
        if facts is None or not facts.has_live(step.surge_instance_id):
            self.run.group(step.group).raised -= 1
            self.finish_step(step, StepState.UNDONE, step.note or "surge given back")
            return
        if self.older_than_grace(step.intent_at):
            step.intent_at = self.now
            self.effects.append(TerminateInstance(step.group, step.surge_instance_id, decrement=True))
            self.change(f"step {step.index}: spare {step.surge_instance_id} still in service, terminate again")
        else:
            self.wait(WaitKind.TERMINATION, f"spare {step.surge_instance_id} to leave {step.group}")

    # -- starting steps ------------------------------------------------------------------------------------

    def start_steps(self) -> None:
        current = next((s.group for s in self.run.steps if not s.state.final), None)
        if current is None:
            return
        steps = [s for s in self.run.steps if s.group == current]
        role = steps[0].role
        if role == Role.CONTROL_PLANE.value:
            if any(s.state.in_flight for s in self.run.steps if s.role == role):
                return
            step = next(s for s in steps if s.state is StepState.PENDING)
            self.start_master(step)
            return
        group = self.run.group(current)
        in_flight = sum(1 for s in steps if s.state.in_flight)
        facts = self.world.groups.get(current)
        for step in steps:
            if in_flight >= self.run.options.max_surge:
                break
            if step.state is not StepState.PENDING:
                continue
            if facts is None or not facts.has_live(step.instance_id):
                self.finish_step(step, StepState.SKIPPED, "no longer in its group")
                continue
            group.raised += 1
            step.state = StepState.SURGING
            step.started_at = step.intent_at = self.now
            step.surge_baseline = sorted(i.instance_id for i in facts.instances)
            self.add_capacity_effect(self.capacity(group))
            self.change(
                f"step {step.index}: surge {group.name} to {group.original_desired + group.raised} "
                f"for {step.instance_id}"
            )
            in_flight += 1

    def start_master(self, step: RunStep) -> None:
        facts = self.facts(step)
        if facts is None or not facts.has_live(step.instance_id):
            self.finish_step(step, StepState.SKIPPED, "no longer in its group")
            return
        problems = masters_not_ready(self.world)
        if problems:
            self.wait(WaitKind.NODE_READY, "masters to be Ready before the next: " + "; ".join(problems))
            return
        step.state = StepState.DRAINING
        step.started_at = step.intent_at = self.now
        step.command_id = self.command_id(step)
        step.node_name = self.node_name(step.instance_id, step)
        self.effects.append(SendCommand(self.drain_command(step)))
        self.change(f"step {step.index}: all masters Ready, drain master {step.instance_id}")

    # -- the run -------------------------------------------------------------------------------------------

    def finish_groups(self) -> None:
        for group in self.run.groups:
            steps = [s for s in self.run.steps if s.group == group.name]
            if group.max_raised_to is None or group.max_restored or not all(s.state.final for s in steps):
                continue
            if group.raised == 0:
                group.max_restored = True
                self.effects.append(SetCapacity(group.name, max_size=group.original_max))
                self.change(f"{group.name}: MaxSize back to {group.original_max}")

    def finish_run(self) -> None:
        run = self.run
        if run.status.stopping and any(s.state is StepState.PENDING for s in run.steps):
            for step in run.steps:
                if step.state is StepState.PENDING:
                    self.finish_step(step, StepState.SKIPPED, f"run {run.status.value}")
        if not all(s.state.final for s in run.steps):
            return
        final = {
            RunStatus.RUNNING: RunStatus.SUCCEEDED,
            RunStatus.PAUSING: RunStatus.PAUSED,
            RunStatus.CANCELLING: RunStatus.CANCELLED,
        }[run.status]
        run.status = final
        run.finished_at = self.now
        run.waiting = ""
        self.change(f"run {final.value}" + (f": {run.reason}" if run.reason else ""))
        self.effects.append(ReleaseLock(run.holder))
        self.effects.append(Metric("RunDuration", (self.now - run.created_at).total_seconds(), MetricUnitName.SECONDS))
        if final is not RunStatus.SUCCEEDED:
            self.effects.append(Metric("RunFailures" if final is RunStatus.PAUSED else "RunsCancelled"))

    def decide(self) -> Decision:
        run = self.run
        if not run.status.active:
            return Decision(run)
        if self.world.lock_lost:
            self.stop_run(RunStatus.PAUSING, "the cluster lock was taken over by another holder")
        if run.cancel_requested and run.status is RunStatus.RUNNING:
            self.stop_run(RunStatus.CANCELLING, "cancelled by an operator")
        handlers = {
            StepState.TERMINATING: self.terminating,
            StepState.UNDO_TERMINATING: self.undo_terminating,
            StepState.SETTLING: self.settling,
            StepState.DRAINING: self.draining,
            StepState.UNDO_DRAINING: self.undo_draining,
            StepState.SURGING: self.surging,
            StepState.UNDOING: self.undoing,
        }
        # terminations first: they give surge units back before anything compares desired capacity
        for state in handlers:
            for step in [s for s in run.steps if s.state is state]:
                handlers[state](step)
        if run.status is RunStatus.RUNNING:
            self.start_steps()
        self.finish_groups()
        self.finish_run()
        if run.status.active:
            waiting = "; ".join(w.what for w in self.waits)
            if waiting != run.waiting:
                run.waiting = waiting
                if not self.changes:
                    self.change("waiting: " + (waiting or "nothing"))
        actions: list[Action] = []
        if self.changes:
            run.updated_at = self.now
            actions.append(SaveRun(run, tuple(self.changes)))
        actions.extend(self.effects)
        return Decision(run, actions, self.waits if run.status.active else [])


def advance(run: Run, world: World, settings: RefresherSettings, now: datetime) -> Decision:
    """Decide the run's next step (rules in the module docstring).

    Args:
        run: the run as stored (its ``version`` conditions the save).
        world: groups (all of the cluster's, for the masters' check), fresh membership, the run's commands, lock.
        settings: grace periods, settle interval, agent grace.
        now: the current time (UTC).

    Returns:
        The decision: the new run state (saved first when it changed), the effects, and what it waits for.
    """
    return _Pass(run, world, settings, now).decide()
