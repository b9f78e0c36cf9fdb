"""Advancing the active refresh run: read the world, decide, apply; the cluster lock is held for one pass at a time.

**The lock** (DESIGN.md, "A refresh and compensation share the cluster lock"): a pass reads the run, the ``LOCK`` item
and membership first (one Query, ``adapters.dynamo.snapshot``), then the groups and the run's commands, and decides. A
pass that decides nothing (a poll while a spare launches or becomes Ready) writes nothing, the lock included. A pass
with something to apply takes the lock as the invocation's holder (``refresher:<run id>:<invocation id>``,
``core.runs.lock_holder``) conditioned on the ``LOCK`` item being exactly the one it read before the world
(``LeaseLock.taking``, written in the transaction of the pass's first ``RUN#`` save; ``LeaseLock.acquire(...,
use_seen=True)`` for a decision that saves nothing): if any holder took the lock since, the take fails and the pass
reads again, so what it decided was decided on a world no other operation changed in between. It keeps the lease for
the passes that follow at once (every ``RUN#`` and ``CMD#`` write is fenced by that lease, and each such pass starts
with its ``RUN#`` save, so a holder whose lease was taken over gets ``LockLostError`` there and applies nothing more;
the lease outlives the function's timeout, so it is renewed only past half its length), and gives it up before the
invocation sleeps or returns (with the save of a wait's start when the pass ends with one: ``SaveRun.release``). A
pass whose only effects are drain commands recorded in its save's transaction, after which the invocation ends
(``passes.passing``), takes the lock and gives it up in that one write (``LeaseLock.passing``): only the SQS message
of a command already recorded follows, and the agent works from the ``CMD#`` item.

**Read-back.** The pass right after one that applied under the lease reads only the groups and the commands a draining
step looks at (``gather``): the run is the one it saved (a save by anyone else since fails on the version and the pass
reads again), the ``LOCK`` item is held, membership was read a moment before. A pass whose only effects are drain
commands, desired capacity raised for steps it surged, or a drained instance terminated for the step it handed its
surge unit to (``outcome_by_event``) ends the invocation instead: the drain's result event reads its outcome back,
the spare's "Node Ready" the surge's and the hand-over's (the surge recorded the launch
wait's start, whose deadline the tick enforces; a launch event makes no pass). A pass
that finds another holder's valid lease waits for it (polling, within the invocation's budget). The run's whole state is
its ``RUN#`` item, so nothing is lost in between; the replenisher takes the lock between two passes and compensates a
launch failure while the run is active. Two invocations of the same run (the tick and a drain result, say) are two
holders: neither can renew or release the other's lease. Only one of them polls a wait (``adapters.dynamo.poller``: the
one whose budget ends last); the others return after their own passes, which read the world after the event that
invoked them, so no event goes unseen.

Waits that an event ends (a spare's launch and a node becoming Ready: the agent's "Node Ready" of the spare; "EC2
Instance Launch Successful" is acknowledged with no pass) are polled every ``REFRESH_EVENT_WAIT_POLL_SECONDS`` (slow,
a safety net), the others every ``REFRESH_POLL_SECONDS``. A poller that wakes to find another invocation took the
polling over (after the pass of its own event) stops before reading the world again.

A save refused for its size (or as invalid) pauses the run with the reason (``lambdas.common.refused``).

A pass whose decision only records (``bookkeeping``: a wait's start, a pause decided before its undo; no AWS call,
no command) saves the run conditioned on its version alone, without taking the lock: a stale writer fails on the
version, and no effect follows the save in that pass.

Calls of a polling pass that applies nothing: the snapshot's two Queries, DescribeAutoScalingGroups and a GetItem
per draining step's command (``gather``); before, it also took and gave up the lock and read the run and membership
apart (8 calls). An event handler that read the active run first (``snapshot.read_state``) passes that read on
(``advance_run(..., state=...)``): its first pass reads membership only.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from operator import attrgetter
from typing import Any

from adapters.dynamo import poller as poller_store
from adapters.dynamo.snapshot import Snapshot, read_state, with_membership
from core.exceptions import LockHeldError, LockLostError, RunConflictError, RunRecordRefusedError, StoreUnavailableError
from core.lock import Lease, describe, renewable_by, valid_holder
from core.runs import LOCK_OPERATION, Run, RunStatus, StepState, new_invocation_id
from lambdas.common.refused import record_refused
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.decide import advance as decide_next
from lambdas.refresher.deps import RefresherDeps, logger
from lambdas.refresher.execute import execute
from lambdas.refresher.passes import bookkeeping, outcome_by_event, passing
from lambdas.refresher.plan import ReleaseLock, SaveRun
from lambdas.refresher.summary import run_summary
from lambdas.refresher.world_read import gather

_STATE = attrgetter("state")
MAX_PASSES = 500  # decisions per invocation (each one changes the run or waits); a bound, never reached in practice


def lasts(lease: Lease, now: float, lease_seconds: float) -> bool:
    """Whether ``lease`` has at least half its length left at ``now`` (epoch seconds)."""
    return lease.expires_at - now >= lease_seconds / 2


def lock_lost(deps: RefresherDeps, run_id: str, err: LockLostError, mid_pass: bool = False) -> str:
    """Log and count (``LockLost``) a pass of run ``run_id`` whose lease another holder took over (``mid_pass``: a
    fenced write of the pass's own found it); returns the ``lock`` note of ``advance_run``'s answer."""
    where, more = (" mid-pass", " more") if mid_pass else ("", "")
    logger.warning(f"run {run_id} lost the cluster lock{where}: nothing more applied ({err})")
    deps.effects().telemetry.count("LockLost")
    return f"lost the cluster lock to {(err.current or {}).get('holder')}: nothing{more} applied"


def refused(deps: RefresherDeps, run: Run, err: RunRecordRefusedError) -> bool:
    """A refused save of ``run`` (as read before the pass) logged, counted and recorded (``lambdas.common.refused``).

    Returns:
        True when the pass should read the run again and go on (it is pausing now, or another invocation saved
        first); False when it should stop (the run was already stopping: its own saves are refused).

    Raises:
        StoreUnavailableError: the small write failed (the next invocation tries again).
    """
    telemetry = deps.effects().telemetry
    advice = "refresh fewer instance groups at once"
    recorded = record_refused(deps.runs, run, err, deps.clock(), telemetry=telemetry, logger=logger, advice=advice)
    return recorded is None or run.status is RunStatus.RUNNING


def advance_run(
    deps: RefresherDeps,
    run_id: str | None,
    budget_seconds: float,
    invocation: str | None = None,
    state: Snapshot | None = None,
    carried: Snapshot | None = None,
) -> dict[str, Any]:
    """Advance the run ``run_id`` (or the active one) until it waits for something not worth polling for, or the
    budget is spent; the cluster lock is held only while a pass reads, decides and applies (module docstring).

    Args:
        invocation: this invocation's id (the Lambda request id), part of the lock holder name; default a new one.
            A caller that already took the lock for the run (``service.start``) passes the id it took it with.
        state: the ``LOCK`` item, pollers and active runs the caller has just read (``snapshot.read_state``, an
            event handler that looked for the active run): the first pass reads only membership after it.
        carried: what the first pass decides on as it is, reading only the groups and commands again: the read a
            start took the lock in, conditioned on its ``LOCK`` item, with the lock item as the start wrote it and
            the run as created (``lambdas.refresher.start``).

    Returns:
        ``{"status": "advanced" | "idle" | "lock_lost", "run": summary, "actions": [...]}``, with ``"lock"`` saying
        who kept the run waiting or took the lock over; ``idle`` when there is no active run; ``lock_lost`` (counted
        ``LockLost``) when a pass's lease was taken over and it stopped applying; ``"polling"`` names the other
        invocation that polls the run when this one left the polling to it.

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: as ``execute`` (the lock is given up first).
    """
    # ``carried``: what the next pass starts from with no new read (the start's read, or after an applied decision)
    deadline = deps.monotonic() + budget_seconds
    results: list[dict[str, str]] = []
    run: Run | None = None
    lease: Lease | None = None
    lock_note = ""
    lost = False  # a pass's lease was taken over: it applied nothing more
    polling = False  # this invocation holds the run's POLL# item
    woke = False  # the next pass follows a poll's sleep (not a change of this invocation's own)
    applied = False  # a pass stopped part-way through applying (the run as last known may be stale)
    last: Run | None = None  # the run's last state this invocation knows: as read, or as it saved it
    last_states: list[StepState] | None = None  # ``[s.state for s in last.steps]``, when known
    poll_note = ""
    settings = deps.settings
    invocation = invocation or new_invocation_id()

    def pause(note: str, seconds: float) -> bool:
        """Wait ``seconds`` before the next pass, noting why; False when the budget does not allow it."""
        nonlocal lock_note
        lock_note = note or lock_note
        if deps.monotonic() + seconds > deadline:
            return False
        deps.sleep(seconds)
        return True

    try:
        for _ in range(MAX_PASSES):
            if carried is not None:
                # the pass right after one that applied under the lease this invocation still holds: the run as it
                # saved it (a save by anyone else since fails on the version, and the pass reads again), the LOCK
                # item needs no read (the lease is held), membership as read a moment ago; the groups and the
                # commands, which the effects change, are read again (gather)
                snapshot, carried = carried, None
            elif state is not None:
                snapshot, state = (
                    with_membership(state, deps.store, settings.membership_max_age_seconds, deps.clock(), deps.memo),
                    None,
                )
            else:
                # the run and the LOCK item, then membership only when the run is active (a tick with no run, every
                # 5 minutes of the week but a refresh's hours, reads no NODE# item), before anything else the
                # decision looks at
                snapshot = read_state(deps.store, deps.runs)
                if snapshot.run(run_id) is not None:
                    snapshot = with_membership(
                        snapshot, deps.store, settings.membership_max_age_seconds, deps.clock(), deps.memo
                    )
            active = snapshot.run(run_id)
            if active is None:
                break  # over (or never started): the last state is read once below
            run, run_id, seen, last, last_states = active, active.run_id, snapshot.lock, active, None
            taker, slept = snapshot.pollers.get(run_id, ("", 0.0))[0], woke
            woke = False
            if polling and slept and taker != invocation:
                # another invocation took the polling over after its own pass (its event's): this pass is redundant
                poll_note, polling = f"invocation {taker} polls the run now", False
                break
            holder = run.holder_for(invocation)
            if lease is None:
                lease = renewable_by(seen, holder, deps.clock().timestamp())  # taken by this invocation's start
                other = valid_holder(seen, deps.clock().timestamp())
                if lease is None and other is not None:  # another holder's pass (another invocation of this run too)
                    if pause(f"waited for the cluster lock held by {other}", settings.poll_seconds):
                        continue
                    break
            applied = False  # this pass's read is the run's last state until something is applied
            # each step's state read once a pass, for the commands looked at, the decision's copy and its start
            states = last_states = list(map(_STATE, run.steps))
            world = gather(run, deps, snapshot.nodes, states, snapshot.membership_confirmed)
            now = deps.clock()
            decision = decide_next(run, world, settings, now, states)
            if decision.actions and bookkeeping(decision.actions):
                # a save no AWS call follows (a wait's start, a pause decided before its undo): conditioned on the
                # run's version alone (and on the lease this invocation holds, if it holds one, without renewing
                # it), so no lock is taken for it (DESIGN.md, "the lock"). A save before a wait that the invocation
                # would give its lease up for anyway (it polls or returns: below) gives it up in the same write
                actions = decision.actions
                releasing = lease is not None and decision.pollable is not None
                if releasing:
                    actions = [replace(a, release=True) if isinstance(a, SaveRun) else a for a in actions]
                try:
                    results += execute(actions, deps.effects(lease), now)
                    if releasing:
                        lease = None
                except RunConflictError:
                    logger.info(f"run {run.run_id} was advanced by another invocation: reading it again")
                    continue
                except RunRecordRefusedError as err:  # nothing applied: the run pauses with the reason (refused.py)
                    if refused(deps, run, err):
                        continue
                    break
                except LockLostError as err:
                    lock_note, lease, lost = lock_lost(deps, run.run_id, err), None, True
                    break
                if decision.pollable is None:
                    continue  # e.g. a pause recorded: its undo comes at the next pass
                # a wait's start recorded, nothing changed in the world: deciding again on the same world would
                # only find the same waits, so wait now (the run as saved is the last state)
                run = last = decision.run.model_copy(update={"version": decision.run.version + 1})
                last_states = decision.states
            elif decision.actions:
                take = None
                try:
                    if lease is None and decision.changed and passing(decision):
                        # only drains, recorded in the save's transaction, and the invocation ends after them: the
                        # save takes the lock and gives it up in the same write (the SQS message is a doorbell)
                        take = deps.lock.passing(holder, LOCK_OPERATION, seen)
                    elif lease is None and decision.changed:
                        # the save that opens the decision takes the lock in its own transaction, conditioned on the
                        # lock item being the one read before the world (LockHeldError: it changed hands since)
                        take = deps.lock.taking(holder, LOCK_OPERATION, settings.lock_lease_seconds, seen)
                    elif lease is None:  # the lock only if the lock item is still the one read before the world
                        lease = deps.lock.acquire(
                            holder, LOCK_OPERATION, settings.lock_lease_seconds, seen=seen, use_seen=True
                        )
                    elif not (decision.changed and lasts(lease, deps.clock().timestamp(), settings.lock_lease_seconds)):
                        # a decision whose first write is its fenced save needs no renewal to find out that its
                        # lease was taken over (the save fails, LockLostError, before any effect): only a lease
                        # past half its length is renewed
                        lease = deps.lock.renew(lease, settings.lock_lease_seconds)
                except LockHeldError as err:  # it changed hands since: what this pass read may be stale
                    if pause(f"waited for the cluster lock held by {describe(err.current)}", settings.poll_seconds):
                        continue
                    break
                except LockLostError as err:
                    lock_note, lease, lost = lock_lost(deps, run.run_id, err), None, True
                    break
                effects = replace(deps.effects(lease), bounds=capacity_bounds(decision.run, world, settings), take=take)
                try:
                    applied = True
                    try:
                        results += execute(decision.actions, effects, now)
                    finally:
                        if effects.taken:  # held from the save on, whatever followed: released below
                            lease = effects.taken[-1]
                except LockHeldError as err:  # the save that was to take the lock found it changed hands
                    applied = False  # nothing was written
                    if pause(f"waited for the cluster lock held by {describe(err.current)}", settings.poll_seconds):
                        continue
                    break
                except LockLostError as err:  # a fenced write found another holder: nothing after it was applied
                    lock_note, lease, lost = lock_lost(deps, run.run_id, err, mid_pass=True), None, True
                    break
                except RunConflictError:
                    logger.info(f"run {run.run_id} was advanced by another invocation: reading it again")
                    continue
                except RunRecordRefusedError as err:  # the save opens the decision: nothing after it applied
                    if refused(deps, run, err):
                        continue
                    break
                applied = False  # all of it applied: the run as saved is its last state
                if decision.changed:
                    last = decision.run.model_copy(update={"version": decision.run.version + 1})
                    last_states = decision.states
                    if any(isinstance(a, ReleaseLock) for a in decision.actions):
                        lease = None  # given up by the decision itself (the run's end)
                    if not last.status.active:
                        break  # over: its last state is the one saved
                    if outcome_by_event(decision):
                        break  # the drain's result event (or the tick) reads its outcome back
                    carried = replace(snapshot, runs=[last])
                    continue
            wait = decision.pollable
            if wait is None:
                break
            # a wait an event ends (a launch, a node Ready) is polled slowly, as a safety net for a lost event
            poll = settings.event_wait_poll_seconds if decision.evented else settings.poll_seconds
            delay = max(poll, wait.after_seconds or 0.0)
            if deps.monotonic() + delay > deadline:
                break
            if lease is not None:
                deps.lock.release(lease)  # yield the lock while waiting: compensation may act meanwhile
                lease = None
            # one invocation polls a run: the one whose budget ends last (adapters.dynamo.poller)
            poller, until = snapshot.pollers.get(run_id, ("", 0.0))
            mine = deps.clock().timestamp() + (deadline - deps.monotonic())
            if poller != invocation:
                live = until > deps.clock().timestamp()
                # a wait an event ends needs no second poller: any live one will do (no claim, no take-over)
                if polling or (live and (until >= mine or decision.evented)):
                    poll_note = f"invocation {poller} polls the run" + (" now" if polling else "")
                    polling = False  # taken over: it is the other's to give up
                    break
                polling = poller_store.claim(deps.store, run_id, invocation, mine)
                if not polling:
                    poll_note = "another invocation polls the run"
                    break
            deps.sleep(delay)
            woke = True
    finally:
        if lease is not None:
            deps.lock.release(lease)
        if polling and run_id:
            # left behind, the item only keeps other invocations from polling until this one's budget ends
            with contextlib.suppress(StoreUnavailableError):
                poller_store.give_up(deps.store, run_id, invocation)
    if last is None and run_id:
        last = deps.runs.get(run_id)  # the run asked for is not active (any more): its last state
    if last is None:
        return {"status": "idle", "actions": results}
    # the run as the last pass read it or as this invocation saved it; read once more when a pass stopped mid-way
    final = (deps.runs.get(last.run_id) or last) if applied else last
    # ``last``'s states when this invocation knows them (read once a pass, or as its decision left them)
    summary = run_summary(final, states=last_states if final is last else None)
    out = {"status": "lock_lost" if lost else "advanced", "run": summary, "actions": results}
    if poll_note:
        out["polling"] = poll_note
    return {**out, "lock": lock_note} if lock_note else out
