"""Verify before acting: what an event claims about an instance is checked against what EC2 and Auto Scaling say.
Pure.

A direct ``lambda:InvokeFunction`` bypasses EventBridge, which alone guarantees that an event with ``source: aws.ec2``
came from EC2 (custom events cannot use an ``aws.`` source; a direct invoke can carry anything). So the Lambda does
not take an event's word for the instance's condition; ``gather`` reads DescribeInstances, and:

- **Spot interruption warning and rebalance recommendation**: EC2 sends both only for Spot Instances ("Spot Instance
  interruption notices" and "EC2 instance rebalance recommendations", Amazon EC2 User Guide). Acted on only when
  DescribeInstances reports ``InstanceLifecycle: spot`` and a state in which the warning can still arrive:
  ``pending`` or ``running``, or ``stopping`` / ``shutting-down`` (EC2 may already be acting when a late-delivered
  warning arrives; draining what is left is still right). ``stopped`` or ``terminated``: nothing is left to drain.
- **Instance state change** to a going state (``stopping``, ``shutting-down``, ``terminated``) of a member: acted on
  only when DescribeInstances agrees that the instance is going or gone: its state is ``stopping``, ``stopped``,
  ``shutting-down`` or ``terminated``, or EC2 no longer knows the id. A forged "terminated" for a running member
  would otherwise delete its ``NODE#`` and cancel its queued drain.
- **Termination lifecycle action** ("EC2 Instance-terminate Lifecycle Action"): Auto Scaling puts an instance in
  ``Terminating:Wait`` while a termination hook holds it, and sends the event then ("Amazon EC2 Auto Scaling
  lifecycle hooks", Amazon EC2 Auto Scaling User Guide). Acted on only when DescribeAutoScalingInstances reports the
  instance ``Terminating:Wait`` in the group the event names. A forged action for an ``InService`` instance would
  otherwise drain it (and the agent would then answer an action Auto Scaling never opened).

A refused event is acknowledged with reason ``unverified`` (logged and counted by ``EventsIgnored`` with that reason,
and by ``EventsRefused``): nothing is drained, detached, recorded or forgotten, and retrying would not change the
answer.
Unknown instances are left to the scope rule (``unknown_instance``), which comes first.
"""

from __future__ import annotations

from lambdas.events.event import Event, EventKind
from lambdas.interruption.plan import Acknowledge, IgnoreReason
from lambdas.interruption.world import World

SPOT = "spot"
SPOT_NOTICE_STATES = frozenset({"pending", "running", "stopping", "shutting-down"})
GOING_STATES = frozenset({"stopping", "shutting-down", "terminated"})  # what a state change must name to act
GONE_OR_GOING = frozenset({"stopping", "stopped", "shutting-down", "terminated"})  # what EC2 must then agree with
SPOT_KINDS = (EventKind.SPOT_INTERRUPTION, EventKind.REBALANCE_RECOMMENDATION)
TERMINATING_WAIT = "Terminating:Wait"  # DescribeAutoScalingInstances' LifecycleState while a termination hook waits


def refuse_spot_notice(notice: Event, world: World) -> Acknowledge | None:
    """None when EC2 confirms a Spot warning or rebalance recommendation is about a live Spot Instance, else the
    ``unverified`` acknowledgement saying what EC2 reported. Events of other kinds: None."""
    if notice.kind not in SPOT_KINDS:
        return None
    facts = world.instance
    if facts.market != SPOT:
        market = facts.market or "on-demand"
        return Acknowledge(IgnoreReason.UNVERIFIED, f"EC2 reports {facts.instance_id} as {market}, not a Spot Instance")
    if facts.state not in SPOT_NOTICE_STATES:
        return Acknowledge(
            IgnoreReason.UNVERIFIED, f"EC2 reports {facts.instance_id} {facts.state or 'in no state'}: nothing to drain"
        )
    return None


def refuse_state_change(notice: Event, world: World) -> Acknowledge | None:
    """None when the state change needs no check (not a going state, or nothing recorded about the instance) or
    EC2 agrees the instance is going or gone; else the ``unverified`` acknowledgement. Other kinds: None."""
    if notice.kind is not EventKind.INSTANCE_STATE_CHANGE or (notice.instance_state or "") not in GOING_STATES:
        return None
    if world.membership is None and not world.commands:
        return None  # nothing to forget or cancel: the decision says not_a_member
    facts = world.instance
    if not facts.known or facts.state in GONE_OR_GOING:
        return None
    return Acknowledge(
        IgnoreReason.UNVERIFIED,
        f"event says {notice.instance_id} is {notice.instance_state}, EC2 reports it {facts.state or 'unread'}",
    )


def refuse_lifecycle_action(notice: Event, world: World) -> Acknowledge | None:
    """None when Auto Scaling reports the instance of a termination lifecycle action in ``Terminating:Wait`` in the
    group the action names, else the ``unverified`` acknowledgement saying what it reported. Other kinds: None."""
    if notice.kind is not EventKind.TERMINATE_LIFECYCLE_ACTION or notice.lifecycle is None:
        return None
    facts = world.instance
    if facts.lifecycle_state != TERMINATING_WAIT:
        where = f"{facts.lifecycle_state}" if facts.lifecycle_state else "in no Auto Scaling group"
        return Acknowledge(
            IgnoreReason.UNVERIFIED,
            f"event says {facts.instance_id} waits on a termination hook, Auto Scaling reports it {where}",
        )
    group = (facts.asg or {}).get("AutoScalingGroupName")
    if group != notice.lifecycle.asg_name:
        return Acknowledge(
            IgnoreReason.UNVERIFIED,
            f"event names group {notice.lifecycle.asg_name} for {facts.instance_id}, Auto Scaling reports {group}",
        )
    return None
