"""The replenisher's decision: notice + world + clock + settings -> a plan. Pure: no I/O, no clock reads.

This package holds ``decide`` (rules 1 and 3) and one module per group of rules: ``backoff`` (2), ``reality`` (3b),
``compensate`` (4 to 6), ``recover`` (7), ``give_back`` and ``asks`` (8), ``cleanup`` (9), ``detached`` (10);
``builder`` is the plan under construction.

Every invocation is a reconcile of the whole cluster (level-triggered): the event only adds what it alone knows
(a launch failure and its time) and says whether the invocation concerns this cluster, or a reconcile, at all.

Rules, in order:

1. **Scope.** A launch event for a group not tagged ``KubernetesCluster=<cluster>`` (another cluster's, or an
   untagged one; the gathered groups are filtered on the tag) is acknowledged (``not_managed``) and changes
   nothing. An agent event for another cluster, or for a command the replenisher did not send (ids other than
   ``giveback-``/``surplus-``), is acknowledged (``not_ours``). A launch success while no ledger carries a
   compensation is acknowledged (``no_compensation``): it changes nothing the tick does not reconcile. Both are
   decided before the world is read (``acknowledged``).
2. **Failure record.** "EC2 Instance Launch Unsuccessful" updates the group's ``Backoff`` (``record_failure``): a
   failure inside the current window moves the window's start (the group stays untrusted until ``window`` after its
   *latest* failure) without widening it, so Auto Scaling's retries every few seconds do not escalate it; a failure
   after the window ended doubles the window (capped at ``BACKOFF_MAX_SECONDS``); a failure after
   ``BACKOFF_RESET_SECONDS`` without one starts over at ``BACKOFF_INITIAL_SECONDS``. A failure at or after the group's
   "healthy since" ends it (flapping restarts the hold); one from before it (delivered late, or again) does not.
   Control-plane groups are recorded but never compensated (``control_plane``): a master outside its AZ's etcd member
   slot can never join. A group of the cluster without a
   kOps role tag is treated the same way (``unknown_role``). This write needs no lock.
3. **Lock.** If another holder's lease is valid, nothing else is done (``lock_held``): the failure is recorded and
   the shortfall, which is re-read from Auto Scaling each time, is acted on at the next invocation. A refresh run
   holds the lock only for one pass at a time, so the handler first waits for it (``LOCK_WAIT_SECONDS``).
3b. **Reconcile with reality** (``reality``): what each ledger says a donor carries is recomputed from the donor's
   actual desired capacity; a donor holding less (kOps or a person reset its sizes) has the ledgers' ``raised_by``
   lowered to what it holds, is noted (``size_reset``, counted) and is not raised again for ``RESET_HOLD_SECONDS``:
   the shortfall is re-evaluated on the other siblings.
4. **Complete recorded intents first** (crash recovery): a donor ``intended`` is raised to its recorded absolute
   target (only if its desired capacity is below it), then marked ``raised``.
5. **Compensate.** A worker group is *failing* while it is in backoff (a failure within its window) and its
   shortfall (desired without an active refresh run's surge - InService - Pending) is positive. The shortfall minus
   what its ledger already carries is spread over *healthy siblings*: worker groups of the same pool
   (``core.kops.pool_of``) in other AZs, not in backoff, not short themselves, not owed capacity, not being changed
   by a refresh run (``Run.busy_groups``), not reset under a compensation within ``RESET_HOLD_SECONDS``, with
   headroom (``floor(original MaxSize *
   DONOR_MAX_SIZE_FACTOR)`` minus desired). Units go one at a time to the sibling that carries the least for this
   group so far, then the lowest desired, then by name: the shortfall is spread evenly, not piled on one AZ. The
   intent (``Donor`` with desired/MaxSize before and the absolute targets, and the donor's current instance ids as
   its baseline) is written before UpdateAutoScalingGroup, and marked ``raised`` after. MaxSize is raised only when
   the target desired exceeds it. No sibling: nothing is done (``no_healthy_sibling``); too little headroom: what
   fits is done (``partial_cover``). A shortfall that shrinks is not given back piecemeal: the whole compensation
   is given back when the group has recovered.
6. **Claim.** The compensating instances are the donor's new instance ids (not in its baseline, not claimed by
   another ledger), up to ``raised_by``. A claimed instance that left the donor (a Spot interruption and early
   replacement) is dropped and its replacement claimed instead; the ledger notes it.
7. **Recover.** A compensated group is *healthy* when it has no shortfall and has at least its desired count of
   Ready nodes (fresh ``NODE#`` records). ``healthy_since`` is recorded (a new failure clears it); once
   ``RECOVERY_HOLD_SECONDS`` have passed since, and its backoff has passed too, the give-back starts: each claimed
   instance gets a drain command ``giveback-<instance id>`` (deadline now + ``GIVEBACK_DRAIN_TIMEOUT_SECONDS``),
   recorded in the ledger before it is sent. A drain that has not run by its deadline is no drain: never recorded
   (the invocations that were to record it ended first), or recorded and never run (still ``queued`` past it, ended
   unstarted by the sweeper, started only after it, or ended by the agent before it ran, its deadline passed while it
   waited for a drain slot: its message never sent or never received, or no slot free). A new one,
   ``giveback-<instance id>-<n>``, is recorded and sent with a whole timeout (``core.model.drain_never_ran``), and the
   instance is not terminated on the old one's deadline. So is one whose item is unreadable (the read leaves it out
   and keeps its id, ``World.unreadable_commands``), at once: it is never a finished drain, and never recorded again
   under that id. ``n`` is past every id recorded for the instance, readable or not.
8. **Give back.** When an instance's command is terminal (succeeded, skipped, timed out; failed counts once its
   deadline passed), the ledger marks it ``terminating``, TerminateInstanceInAutoScalingGroup with
   ShouldDecrementDesiredCapacity=true follows, then ``terminated``. An instance that left the donor meanwhile is
   ``gone`` and its replacement is drained and given back instead. A give-back never takes a donor below its floor,
   the larger of its MinSize (as Auto Scaling reports it now) and its desired capacity before the raise: a donor an
   operator or kOps resized is given back only what its desired count still holds above the floor (noted; of a donor
   raised for several ledgers, the earlier raises' units first, as ``reality`` shares one: ``asks.held_for``), and an
   instance ``terminating`` whose decrement would cross the floor is ``kept`` (the donor's own now; its node is
   uncordoned; noted and counted as ``size_reset``). Outcomes are verified on the next read: an instance recorded
   ``terminated`` that is still in its donor (a refused or lost terminate) is ``terminating`` again and retried
   (``unverified``). A raised unit that never launched is cancelled by lowering the donor's desired capacity (never
   below its InService/Pending count), recorded before (``cancel_to``) and counted ``returned`` only once a later
   invocation reads it back. When a donor has nothing left to give back, its MaxSize is restored (to the original
   MaxSize, or its desired if that is higher: noted; recorded before, ``max_asked``) unless another ledger still has
   it raised, and the donor is ``restored`` once a later invocation reads the restore back; when every donor is, the
   compensation is cleared. These asks have a deadline (``asks``, ``REPLENISH_GIVE_BACK_TIMEOUT_SECONDS`` from the
   first ask of a donor not read back): past it the donor is closed out with what it still holds left raised
   (``Ledger.left_raised``, noted ``left_raised``, counted ``CapacityLeftRaised``), its instances being given back
   kept and uncordoned.
9. **Clean up** (not for instances named by an active ``RUN#`` or a ``DETACH#``, nor in groups an active refresh
   run names; at most ``CLEANUP_LIMIT`` per invocation): a control-plane group with more InService/Pending instances
   than its etcd members (kOps defines one etcd member per ``master-<az>`` group) has the extra ones removed (Ready
   registered ones kept first); one with a node is drained first (``surplus-<instance id>``; sent again as
   ``surplus-<instance id>-<n>``, ``n`` past every id recorded for it, readable or not, when the last one never ran
   or is unreadable, as a give-back's). Any instance
   InService longer than ``MAX_PROVISION_SECONDS`` (from its EC2 launch time) without a fresh ``NODE#`` record is
   terminated without decrement, so the group replaces it; skipped when no fresh ``NODE#`` record exists at all
   (the agent is not reporting: ``membership_unavailable``).
10. **Detached instances never left running** (``detached``): an instance detached for early replacement still
    running ``DETACHED_MAX_SECONDS`` after its ``DETACH#`` record is terminated (``terminating`` recorded before,
    ``terminated`` after; one EC2 no longer runs is ``gone``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from core.kops import Role
from core.settings import ReplenisherSettings
from lambdas.events.event import Event, EventKind
from lambdas.replenisher.decide.backoff import record_launch_failure
from lambdas.replenisher.decide.builder import OWN_COMMAND_PREFIXES, Builder, Plan, finish
from lambdas.replenisher.decide.cleanup import cleanup
from lambdas.replenisher.decide.compensate import reconcile_group
from lambdas.replenisher.decide.detached import sweep_detached
from lambdas.replenisher.decide.reality import reconcile_donors
from lambdas.replenisher.plan import Note, Reason
from lambdas.replenisher.world import World


def decide(notice: Event, now: datetime, settings: ReplenisherSettings, world: World, lock_free: bool = True) -> Plan:
    """Decide what to do (the rules are in the module docstring).

    Args:
        notice: the parsed event.
        now: the current time (UTC, aware).
        settings: the Lambda's settings.
        world: what Auto Scaling and the table say.
        lock_free: False when another holder's lease on the cluster lock is valid (rule 3).

    Returns:
        The plan: a non-empty tuple of actions (``Note``\\ s only when nothing is to be done), and the lock
        operation its capacity changes need.
    """
    b = Builder(world, settings, now)
    launch = notice.kind in (EventKind.LAUNCH_FAILED, EventKind.LAUNCH_SUCCEEDED)
    if launch and notice.asg_name not in world.groups:
        return Plan((Note(Reason.NOT_MANAGED, f"{notice.asg_name} is not tagged for cluster {settings.cluster_name}"),))
    early = acknowledged(notice, settings, lambda: True)
    if early is not None:
        return early

    if notice.kind is EventKind.LAUNCH_FAILED:
        record_launch_failure(b, notice)
    if not lock_free:
        holder = (world.lock or {}).get("holder")
        b.note(
            Reason.LOCK_HELD,
            f"{holder} holds the lock ({(world.lock or {}).get('operation')}): acting at the next invocation",
        )
        return finish(b)

    reconcile_donors(b)
    for name in sorted(world.groups):
        if world.groups[name].role is Role.NODE:
            reconcile_group(b, world.groups[name])
    cleanup(b)
    sweep_detached(b)
    return finish(b)


def acknowledged(
    notice: Event, settings: ReplenisherSettings, compensating: Callable[[], bool], hooked: Collection[str] = ()
) -> Plan | None:
    """The plan of an event that concerns no reconcile, decided before the world is read (the handler asks it
    first; ``decide`` asks it again), or None when the whole cluster is to be reconciled. Pure but for
    ``compensating``, called only for a launch success.

    - An agent result of a command the replenisher did not send, or of another cluster (rule 1): ``not_ours``. The
      stack's rule routes only ``giveback-``/``surplus-`` results here; this covers an event that reached the
      function another way.
    - "EC2 Instance Launch Successful" of a group in ``hooked`` while no ledger carries a compensation
      (``compensating()`` False): a launch that succeeded changes nothing but a compensation (its donors' claims,
      rule 6; a recovery's hold, rule 7); the tick reconciles everything else (``no_compensation``). During a
      refresh a launch succeeds for every node replaced: each was a whole reconcile (the membership, the groups)
      that found nothing to do. A group not in ``hooked`` (new to this environment: a group kOps just created) is
      reconciled whole, which gives it its lifecycle hook at once (``hooks``).

    Args:
        compensating: whether any ``COMP#`` ledger carries a compensation (``gather.compensation_active``: one
            Query); True when unsure. Not called for a result or a group not in ``hooked``.
        hooked: the groups whose termination hook this environment found right (``handler.Deps.hooks_seen``).
    """
    ours = notice.cluster == settings.cluster_name and (notice.command_id or "").startswith(OWN_COMMAND_PREFIXES)
    if notice.kind is EventKind.DRAIN_FINISHED and not ours:
        return Plan((Note(Reason.NOT_OURS, f"command {notice.command_id} of cluster {notice.cluster}"),))
    if notice.kind is EventKind.LAUNCH_SUCCEEDED and notice.asg_name in hooked and not compensating():
        return Plan((Note(Reason.NO_COMPENSATION, f"a launch in {notice.asg_name}: no ledger carries a compensation"),))
    return None
