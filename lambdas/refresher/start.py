"""Starting a refresh run: plan it on one read of the world, take the cluster lock and create its ``RUN#`` item in one
write, and advance it.

**Calls of a start** (the trigger: a manual request or the weekly schedule). The plan reads the snapshot first
(``adapters.dynamo.snapshot.read_snapshot``: the ``LOCK`` item and the active runs in one Query, membership in
another), then the groups with their launch facts (DescribeAutoScalingGroups, DescribeLaunchTemplates,
DescribeInstances). When the ``LOCK`` item it read was free (no valid lease), the run's ``RUN#`` item is created in
the transaction that takes the lock conditioned on exactly that item (``LeaseLock.taking``, ``CreateRun`` with
``Effects.take``), and the first pass decides on the same read (``advance_run(..., carried=...)``), reading only the
groups again: 11 calls to a first surge, where the plan's reads, a lock read and write, a second read of the runs
under the lock and the first pass's own snapshot cost 17.

Why that is safe: every ``RUN#`` item is created under the cluster lock (here and by the interruption Lambda's
replacement run, ``lambdas.interruption.replacement``), and a holder that takes a free or expired lock raises its
fencing counter. The Query read the ``LOCK`` item before the runs, so a run created after the ``LOCK`` item was read
is either seen by the same Query or changed the ``LOCK`` item's fencing since, and the take, pinned to the fencing
read, fails (``LockHeldError``). When the lock was held when read (its holder could release it without a new fencing
value, after creating a run), or when the take fails, the start falls back to reading the lock (``AcquireLock``), the
runs again under it (``CreateRun`` raising ``RunAlreadyActiveError``), and the world again in its first pass.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from adapters.dynamo.lock import LOCK_SK
from adapters.dynamo.snapshot import read_snapshot
from core.exceptions import LockHeldError, RunAlreadyActiveError
from core.lock import valid_holder
from core.runs import (
    LOCK_OPERATION,
    DrainTimeoutPolicy,
    GroupSurge,
    Run,
    RunOptions,
    Selection,
    new_invocation_id,
    new_run_id,
    run_id_of_holder,
)
from core.settings import RefresherSettings, parse_duration
from lambdas.events.request import RefreshRequest
from lambdas.refresher.advance import advance_run
from lambdas.refresher.deps import RefresherDeps, logger
from lambdas.refresher.execute import execute
from lambdas.refresher.gather import read_groups
from lambdas.refresher.plan import AcquireLock, Action, CreateRun
from lambdas.refresher.runsize import too_large
from lambdas.refresher.select import format_table, select
from lambdas.refresher.summary import step_row
from lambdas.refresher.world import World


def options_of(request: RefreshRequest | None, settings: RefresherSettings, trigger: str) -> RunOptions:
    """A run's options: the request's values, else the settings' defaults."""
    policy = DrainTimeoutPolicy(settings.drain_timeout_policy)
    if request is None:
        return RunOptions(
            trigger=trigger,
            selection=Selection.MAX_AGE,
            max_age_seconds=settings.max_age_seconds,
            max_surge=settings.max_surge,
            drain_timeout_seconds=settings.drain_timeout_seconds,
            drain_timeout_policy=policy,
        )
    return RunOptions(
        trigger=trigger,
        selection=Selection.ALL if request.all else Selection.MAX_AGE,
        max_age_seconds=parse_duration(request.max_age) if request.max_age else settings.max_age_seconds,
        instance_groups=request.instance_groups,
        max_surge=request.max_surge or settings.max_surge,
        drain_timeout_seconds=request.drain_timeout_seconds or settings.drain_timeout_seconds,
        drain_timeout_policy=request.drain_timeout_policy or policy,
    )


def start(
    options: RunOptions, dry_run: bool, deps: RefresherDeps, budget_seconds: float, invocation: str | None = None
) -> dict[str, Any]:
    """Plan a run and, unless ``dry_run``, start it (lock, ``RUN#``) and advance it (module docstring).

    Args:
        options: the run's options (``options_of``).
        dry_run: plan and show the actions, change nothing.
        budget_seconds: what the invocation may spend polling (``advance_run``).
        invocation: this invocation's id (the lock holder is ``refresher:<run id>:<invocation>``; default a new one).

    Returns:
        The plan (``table``, ``deadlines``, ``groups``, ``steps``) with ``status``: ``started`` (and
        ``advance_run``'s answer), ``already_running``, ``refused`` (``reason``), ``dry_run`` or ``nothing_to_do``.

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: as ``execute`` and ``advance_run``.
    """
    invocation = invocation or new_invocation_id()
    now = deps.clock()
    snapshot = read_snapshot(deps.store, deps.settings.membership_max_age_seconds, now, deps.memo)
    active = snapshot.run(None)
    if active is not None:
        logger.info(f"refresh asked while run {active.run_id} is active: advancing that one")
        out = advance_run(deps, active.run_id, budget_seconds, invocation)
        return {**out, "status": "already_running"}
    groups = read_groups(
        deps.aws.autoscaling, deps.aws.ec2, deps.settings.cluster_name, deps.gather_memo, with_launch_facts=True
    )
    world = World(groups=groups, nodes={r.instance_id: r for r in snapshot.nodes})
    plan = select(options, world, now, options.max_age_seconds or deps.settings.max_age_seconds)
    table = format_table(plan.rows, deps.settings.deadlines)
    base: dict[str, Any] = {
        "table": table,
        "deadlines": deps.settings.deadlines,
        "groups": [asdict(r) for r in plan.rows],
        "steps": [step_row(s) for s in plan.steps],
    }
    logger.info("refresh plan\n" + table, extra={"groups": base["groups"], "steps": len(plan.steps)})
    if plan.refusal and not dry_run:
        logger.warning(f"refresh refused: {plan.refusal}")
        return {**base, "status": "refused", "reason": plan.refusal}
    run_id = new_run_id(now)
    chosen = {s.group for s in plan.steps}
    run = Run(
        run_id=run_id,
        cluster=deps.settings.cluster_name,
        options=options,
        created_at=now,
        updated_at=now,
        groups=[
            GroupSurge(
                name=g.name,
                role=g.role.value,
                instance_group=g.instance_group,
                min_size=g.min_size,
                original_desired=g.desired,
                original_max=g.max_size,
            )
            for g in groups.values()
            if g.name in chosen
        ],
        steps=list(plan.steps),
    )
    oversize = too_large(deps.runs, run)  # refused before the lock: a record that cannot be written, or outgrows it
    holder, lease_seconds = run.holder_for(invocation), deps.settings.lock_lease_seconds
    actions: list[Action] = [AcquireLock(holder, lease_seconds), CreateRun(run)]
    if dry_run:
        results = execute(actions, deps.effects(), now, dry_run=True)
        return {**base, "status": "dry_run", "refusal": plan.refusal or oversize, "actions": results}
    if oversize:
        logger.warning(f"refresh refused: {oversize}")
        return {**base, "status": "refused", "reason": oversize}
    if not plan.steps:
        return {**base, "status": "nothing_to_do"}
    carried = None
    if valid_holder(snapshot.lock, now.timestamp()) is None:  # free when read: take it in the run's creation
        take = deps.lock.taking(holder, LOCK_OPERATION, lease_seconds, snapshot.lock)
        try:
            results = execute([CreateRun(run)], replace(deps.effects(), take=take), now)
        except LockHeldError as err:  # it changed hands since the read: read it again below, and the runs under it
            logger.info(f"the cluster lock changed hands since it was read ({err}): taking it again")
        else:
            # the first pass decides on this read: the lock item as the creation wrote it, the run as created
            carried = replace(snapshot, lock={"sk": LOCK_SK, **take.attrs}, runs=[run])
    give_up_at = deps.monotonic() + budget_seconds
    while carried is None:
        try:
            results = execute(actions, deps.effects(), now)
            break
        except RunAlreadyActiveError as err:
            logger.info(f"refresh asked while run {err.run_id} became active: advancing that one")
            out = advance_run(deps, err.run_id, budget_seconds, invocation)
            return {**base, **out, "status": "already_running"}
        except LockHeldError as err:
            # another operation's pass holds it for a moment: wait within the budget; a refresh run is refused
            if run_id_of_holder(err.holder) is None and deps.monotonic() + deps.settings.poll_seconds < give_up_at:
                deps.sleep(deps.settings.poll_seconds)
                continue
            logger.warning(f"refresh refused: the cluster lock is held by {err.holder}")
            return {**base, "status": "refused", "reason": f"cluster lock held by {err.holder}", "lock": err.current}
    logger.info(
        f"run {run_id} started: {len(plan.steps)} instances to replace",
        extra={"run_id": run_id, "trigger": options.trigger},
    )
    # the same holder: its first pass keeps the lease (and decides on the start's read when it was carried)
    out = advance_run(deps, run_id, budget_seconds, invocation, carried=carried)
    return {**base, **out, "status": "started", "actions": results + out["actions"]}
