"""The decision: notice + world + clock + settings -> a plan (a list of actions). Pure: no I/O, no clock reads.

This package holds ``decide`` (rules 1 to 3, 5 and 6) and one module per group of rules: ``common`` (the plan,
command ids, deadlines, scope), ``spot`` (4 and 5b), ``rebalance`` (5a and what resolves a rebalance cordon),
``lifecycle`` (7), ``state`` (8).

Rules, in order:

1. **Late**: a Spot warning is late once ``now`` is past ``event time + SPOT_DEADLINE_SECONDS`` (120 s: the
   instance is gone or going), whatever its ``instance-action``; a rebalance recommendation once ``now`` is past
   ``event time + REBALANCE_DRAIN_TIMEOUT_SECONDS``. Acknowledged, reason ``late``.
2. **Scope**: the instance must be in an ASG tagged ``KubernetesCluster=<cluster>`` (``core.kops.managed_group``).
   Otherwise acknowledged: ``other_cluster`` (tagged for another cluster), ``unmanaged_group`` (no cluster tag),
   ``not_in_asg`` (a live instance in no ASG) or ``unknown_instance`` (EC2 does not know the id). An instance that
   this system already detached (``DETACH#`` record) is judged by the group its record names.
3. **Spot warning**: a command with id ``spot-<event id>``, ``node_name`` from the membership record when it is
   fresh (``MEMBERSHIP_MAX_AGE_SECONDS``), else None (the agent resolves the node from ``spec.providerID``, or
   reports ``skipped`` when the instance never joined). Its kind and deadline follow AWS's documented timing for the
   warning's ``instance-action`` ("Spot Instance interruption notices", Amazon EC2 User Guide: "a warning that is
   issued two minutes before Amazon EC2 stops or terminates your Spot Instance. If you specify hibernation as the
   interruption behavior, you receive an interruption notice, but you do not receive a two-minute warning because
   the hibernation process begins immediately"), see ``notice_seconds``:

   - ``terminate`` and ``stop``: a ``drain``, deadline ``event time + SPOT_DEADLINE_SECONDS`` (default 120 s, the
     documented two minutes). A stopped instance comes back, but its node is gone until then.
   - ``hibernate``: no time is given (deadline = the event time), so a ``cordon``, not a drain: the agent does not
     run a drain whose deadline has passed (evicting with no time left stops no pod cleanly, and the hibernating
     kubelet cannot end them), while a cordon is one write that stays right when late: no pod is scheduled onto the
     node in the seconds before Kubernetes marks it NotReady. Its pods are then evicted by Kubernetes' taint-based
     eviction (``node.kubernetes.io/unreachable``, 300 s toleration by default). The node stays cordoned when the
     instance resumes; lifting that cordon is not done here.
4. **Early replacement** (``EARLY_REPLACEMENT``, default on): for ``instance-action=terminate`` on a worker whose
   lifecycle state is ``InService``, record ``DETACH#`` (``intended``), DetachInstances with
   ShouldDecrementDesiredCapacity=False (the ASG launches the replacement now instead of two minutes later), then
   mark it ``detached``. Never for ``stop``/``hibernate`` (the instance comes back and would then be surplus,
   outside its ASG). Never for control-plane groups: a kOps master ASG has min = max = 1 and its instance is an
   etcd member; detaching it makes the ASG launch a second master for the same etcd member slot while the old
   one still runs, and etcd-manager expects exactly one master per instance group. The master is drained and
   replaced by the ASG after the termination, as kOps intends. An ASG of the cluster with no kOps role tag is
   treated the same way (unknown role: the conservative choice). Never for an instance a run (a refresh or a
   replacement; the active run is read for every Spot warning) is replacing now (its step surging, draining,
   terminating or settling: ``already_replacing``): the run's spare is its replacement, and the run gives its surge
   unit back when the instance is reclaimed under it (``lambdas.refresher.decide.replace``). A step giving its surge
   back keeps the instance: then the early replacement is made as usual.
5. **Rebalance recommendation**: ``REBALANCE_POLICY`` ``ignore`` (acknowledged, ``rebalance_ignored``), ``cordon``
   (default; a ``cordon`` command) or ``drain`` (a ``drain`` command); id ``rebalance-<event id>``, deadline
   ``now + REBALANCE_DRAIN_TIMEOUT_SECONDS``; no early replacement (no interruption is certain yet). The command
   carries ``options.uncordon_after_seconds = REBALANCE_QUIET_SECONDS``: the agent gives the cordon back that long
   after the command ended if nothing followed for the instance and the cordon is still that command's
   (``agent.cordons``; a node someone else cordoned is never uncordoned). State: the ``CMD#`` item, so the quiet
   period survives an agent restart.

   With ``replace``, the same ``cordon`` command, and before it the replacement (rule 5c).

   a. **Duplicates of a recommendation** (another event id for the same instance): acknowledged ``already_draining``
      while a drain of the instance is queued or running, ``already_interrupted`` once a Spot warning to terminate it
      was decided (its drain in any status: the recommendation may come with the warning or after it, and a
      replacement run would launch a second instance for it; a warning that took a drain over, rule 5b, until the
      Spot deadline it set: ``rebalance.spot_warned``), ``rebalance_in_effect`` while an earlier rebalance
      command is active or still holds its cordon (not given back, not resolved).
   b. **A Spot warning after a recommendation, or during a refresh**: a rebalance or refresh ``drain`` (reason
      ``rebalance...`` or ``refresh <run> step <n>``) still queued or running is tightened to the Spot deadline
      (``TightenCommand``, a conditional update of its ``CMD#`` item that the agent's running drain reads back on
      its heartbeat; the agent bounds its graces by it, keeps its cordon and marks it ``instance-ending``): one
      drain, not two (one still queued is sent again: ``execute``); if it ended meanwhile the Spot drain is recorded
      and sent as usual. A rebalance cordon is escalated: the Spot drain is recorded as usual. Every rebalance
      command of the instance still holding its cordon is marked resolved (``ResolveCordon``), as a lifecycle action
      (rule 7) and a state change (rule 8) do too, so its cordon is never given back.
   c. **Replacement** (``REBALANCE_POLICY=replace``, ``rebalance.replacement_steps``): a one-instance refresh run
      (trigger ``rebalance``) replaces the at-risk worker surge first: the refresher launches a spare in its ASG,
      waits for it Ready (the run's deadlines), drains the old node, terminates it with decrement, under the
      cluster lock, the capacity clamp and the give-back of every run. Never a master or a group with no kOps
      role, never while another run is active (acknowledged in the plan as a ``Skip`` with its reason); up to
      ``REBALANCE_REPLACE_LIMIT`` instances join one replacement run. The cordon is recorded either way: it is the
      fallback, as under ``cordon`` (capped by 5d when no replacement was started or joined and no run replaces the
      instance already; a start or join past the cap carries the cordon's id, ``capped_cordon``, and the executor
      drops the cordon when it is refused: ``rebalance.cap_fallback``). A Spot warning during the replacement
      escalates the cordon or tightens the run's drain (5b).
   d. **A cap on rebalance cordons** (``REBALANCE_MAX_CORDONED_PERCENT``, policies ``cordon`` and ``drain``, and the
      fallback cordon of ``replace``: a wave replaced one at a time cordoned every other node of the pool): when
      the other instances' rebalance commands in effect already number that share of the cluster's nodes (the
      agent's membership count; at least one), the recommendation is acknowledged ``rebalance_capped``: AWS
      recommends a whole pool at once, and with no autoscaler a third of the cluster cordoned for the quiet period
      leaves pods nowhere to go. A soft cap: recommendations decided at once may each see room for one more. A
      Spot warning that follows drains the node as usual.
6. **Duplicates** (the same event again, after the idempotency record expired or after a crash): a ``CMD#`` item
   already ``queued`` is re-sent exactly as recorded (a crash may have happened between the record and the
   send; the agent makes a second message harmless through the ``CMD#`` status); one ``running`` or terminal is
   not, nor one recording no command that validates (``command_unreadable``: the agent role can write the item).
   A ``DETACH#`` record still ``intended`` is completed (detach if the instance is still ``InService`` or
   ``Standby`` in its ASG, then mark it; only marked when it is in no group or ``Detaching``; left ``intended`` for the
   replenisher's sweep while Auto Scaling terminates it: ``spot.complete_intent``); one ``detached`` is not
   repeated. An event that needs nothing more is acknowledged as ``duplicate``.
7. **Termination lifecycle action** (``decide_lifecycle``): only actions of our hook (``LIFECYCLE_HOOK_NAME``;
   another tool's hook: ``foreign_hook``), not later than ``event time + LIFECYCLE_DRAIN_TIMEOUT_SECONDS``
   (``late``), in scope as rule 2. The action is recorded (``HOOK#``, ``pending``; the same token again is a
   duplicate). Then **one drain, not two**: if the instance already has a ``drain`` command that is ``queued`` or
   ``running`` (a Spot drain, a refresher's drain), no new one: the agent completes the action when that drain
   ends (``AwaitDrain``); if a drain of it ``succeeded`` within ``LIFECYCLE_RECENT_DRAIN_SECONDS``, the action is
   completed now with CONTINUE (``CompleteHook``). Otherwise a ``drain`` command ``lifecycle-<event id>`` with
   deadline ``event time + LIFECYCLE_DRAIN_TIMEOUT_SECONDS``; the agent keeps the action alive with heartbeats
   while it drains and completes it with CONTINUE when the drain ends (whatever the result: an instance with no
   node is continued at once).
8. **Instance state change** (``decide_state_change``) to ``stopping``, ``shutting-down`` or ``terminated``: the
   node is going, so its ``NODE#`` record is deleted, the instance's ``queued`` commands are cancelled (ended
   ``skipped``, reason in the result) and its rebalance cordons resolved (never given back). Other states:
   ``state_ignored``; an instance with no membership record: ``not_a_member`` (the rule sees every instance of the
   account; only members are looked at further).
9. **Verified with EC2** (``verify``): a Spot warning or rebalance recommendation is acted on only for an instance
   DescribeInstances reports as a live Spot Instance; a going state change only when DescribeInstances agrees; a
   termination lifecycle action only when DescribeAutoScalingInstances reports the instance ``Terminating:Wait`` in
   the group the action names. Otherwise acknowledged, ``unverified`` (a direct invoke can carry any event).
"""

from __future__ import annotations

from datetime import datetime

from core.kops import managed_group
from core.model import Command, CommandKind
from core.settings import InterruptionSettings, RebalancePolicy
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.decide.common import (
    Plan,
    command_id_for,
    command_steps,
    deadline_of,
    node_name_of,
    notice_seconds,
    out_of_scope,
    too_late,
)
from lambdas.interruption.decide.lifecycle import decide_lifecycle
from lambdas.interruption.decide.rebalance import (
    cap_fallback,
    duplicate_rebalance,
    rebalance_capped,
    replacement_steps,
)
from lambdas.interruption.decide.spot import early_replacement_steps, spot_command_steps
from lambdas.interruption.decide.state import decide_state_change
from lambdas.interruption.plan import EFFECTS, Acknowledge, Action, IgnoreReason
from lambdas.interruption.verify import refuse_spot_notice, refuse_state_change
from lambdas.interruption.world import World

__all__ = [
    "Plan",
    "command_id_for",
    "deadline_of",
    "decide",
    "decide_lifecycle",
    "decide_state_change",
    "notice_seconds",
    "too_late",
]


def decide(notice: Event, now: datetime, settings: InterruptionSettings, world: World) -> Plan:
    """Decide what to do about one notice (the rules are in the package docstring).

    Args:
        notice: the parsed event.
        now: the current time (UTC, aware).
        settings: the Lambda's settings.
        world: what AWS and the table say (see ``world.World``).

    Returns:
        The plan: a non-empty tuple of actions, to be applied in order by ``execute.execute``.
    """
    if notice.kind is EventKind.TERMINATE_LIFECYCLE_ACTION:
        return decide_lifecycle(notice, now, settings, world)
    if notice.kind is EventKind.INSTANCE_STATE_CHANGE:
        refused = refuse_state_change(notice, world)  # rule 9
        return Plan((refused,)) if refused is not None else decide_state_change(notice, world)
    if too_late(notice, now, settings):
        late_by = (now - notice.event_time).total_seconds()
        return Plan((Acknowledge(IgnoreReason.LATE, f"event is {late_by:.0f} s old"),))
    ignored = out_of_scope(world, settings) or refuse_spot_notice(notice, world)  # rules 2 and 9
    if ignored is not None:
        return Plan((ignored,))
    assert world.instance.asg is not None  # out_of_scope guarantees a managed group
    group = managed_group(world.instance.asg, settings.cluster_name)
    assert group is not None

    quiet: int | None = None
    replace = False
    if notice.kind is EventKind.REBALANCE_RECOMMENDATION:
        if settings.rebalance_policy is RebalancePolicy.IGNORE:
            return Plan((Acknowledge(IgnoreReason.REBALANCE_IGNORED, "REBALANCE_POLICY=ignore"),))
        if world.command is None and (duplicate := duplicate_rebalance(command_id_for(notice), world.commands, now)):
            return Plan((duplicate,))
        capping = settings.rebalance_policy is not RebalancePolicy.REPLACE  # replace: its fallback only, below
        if capping and world.command is None and (capped := rebalance_capped(world, settings)) is not None:
            return Plan((capped,))
        kind = CommandKind.DRAIN if settings.rebalance_policy is RebalancePolicy.DRAIN else CommandKind.CORDON
        reason = "rebalance-recommendation"
        quiet = settings.rebalance_quiet_seconds
        replace = settings.rebalance_policy is RebalancePolicy.REPLACE
    else:
        # hibernation begins with the warning: nothing is left to drain in, only the cordon stays right (rule 3)
        hibernate = notice.instance_action is InstanceAction.HIBERNATE
        kind = CommandKind.CORDON if hibernate else CommandKind.DRAIN
        action = notice.instance_action.value if notice.instance_action else "unknown"
        reason = f"spot-interruption:{action}"

    command = Command(
        command_id=command_id_for(notice),
        cluster=settings.cluster_name,
        kind=kind,
        instance_id=notice.instance,
        node_name=node_name_of(world, now, settings),
        reason=reason,
        deadline=deadline_of(notice, now, settings),
    )
    if quiet is not None:
        command = command.model_copy(
            update={"options": command.options.model_copy(update={"uncordon_after_seconds": quiet})}
        )
    actions: list[Action]
    if notice.kind is EventKind.SPOT_INTERRUPTION:
        actions = spot_command_steps(command, world)
        actions += early_replacement_steps(notice, world, settings, group.role)
    elif replace and world.command is None:
        # the run first, then the cordon: the cordon keeps pods off the node until the run drains it, and stays
        # (given back after the quiet period) when no replacement may start (rule 5c)
        steps, capped = cap_fallback(
            replacement_steps(notice, now, settings, world, group), command.command_id, world, settings
        )
        if capped is not None:  # the cordon policy's cap, on a cordon no replacement takes
            return Plan((*steps, capped))
        actions = steps + command_steps(command, world)
    else:
        actions = command_steps(command, world)
    if not any(isinstance(a, EFFECTS) for a in actions):
        actions.append(Acknowledge(IgnoreReason.DUPLICATE, "command and early replacement already done"))
    return Plan(tuple(actions))
