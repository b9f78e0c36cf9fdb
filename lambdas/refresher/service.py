"""The refresher's application service: what each kind of invocation does to the refresh runs.

``serve`` answers one parsed invocation; ``start.start`` plans and starts a run, ``advance.advance_run`` moves the
active one on until it waits for something not worth polling for (the decisions are ``lambdas.refresher.decide``'s,
the effects ``lambdas.refresher.execute``'s), ``status`` and ``cancel`` answer the manual requests,
``free_orphan_lock`` repairs what a crash between the lock and the run left. ``handler`` wires it to Lambda;
``summary`` shows runs.
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter
from typing import Any

from adapters.dynamo.snapshot import read_state
from core.exceptions import (
    AwsRequestError,
    AwsUnavailableError,
    InvalidRequestError,
    RunConflictError,
    RunRecordRefusedError,
)
from core.lock import Lease
from core.runs import (
    LOCK_OPERATION,
    REBALANCE_TRIGGER,
    Run,
    StepState,
    WaitDeadline,
    new_invocation_id,
    run_id_of_holder,
)
from lambdas.common.prologue import rejected
from lambdas.common.refused import record_refused, refusal_reason
from lambdas.events.event import Event, EventKind
from lambdas.events.request import CancelRequest, StatusRequest
from lambdas.refresher.advance import advance_run
from lambdas.refresher.bounds import request_refusals
from lambdas.refresher.deps import RefresherDeps, logger
from lambdas.refresher.start import options_of, start
from lambdas.refresher.summary import group_rows, run_summary

__all__ = ["logger", "serve"]  # what ``handler`` wires

# -- the work -----------------------------------------------------------------------------------------------------


def free_orphan_lock(deps: RefresherDeps) -> str | None:
    """Release a lock held by a refresher run that does not exist or is over (a crash between taking the lock and
    writing the run, or between ending the run and releasing). Returns the holder released, if any."""
    item = deps.lock.current() or {}
    run_id = run_id_of_holder(item.get("holder"))
    if run_id is None:
        return None
    run = deps.runs.get(run_id)
    if run is not None and run.status.active:
        return None
    acquired = float(item.get("acquired_at", 0) or 0)
    if deps.clock().timestamp() - acquired < deps.settings.effect_grace_seconds and run is None:
        return None  # a start may be between the lock and the run right now
    deps.lock.release(
        Lease(item["holder"], LOCK_OPERATION, int(item["fencing"]), float(item.get("lease_expires_at", 0)))
    )
    logger.warning(
        f"released the cluster lock of {item['holder']}: its run is " + ("missing" if run is None else run.status.value)
    )
    return str(item["holder"])


def status(request: StatusRequest, deps: RefresherDeps) -> dict[str, Any]:
    """Runs (newest first; the newest with its steps), the compensation ledger, the lock, membership, and the
    cluster's groups (``summary.group_rows``: sizes, instances by lifecycle state and by market).

    The groups cost one DescribeAutoScalingGroups per 100 groups and one DescribeInstances per 200 instances; when
    AWS refuses or does not answer them, the rest is still returned, with ``cluster_groups_error`` saying why. (Not
    ``groups``: a refresh's responses use that key for the plan's rows.)

    With ``run_id``: that run only (with its steps), and its whole ``RUN#`` record as ``run_record`` (what
    ``node-manager status --run ID --chart FILE`` draws); ``refused`` when no such run exists.
    """
    if request.run_id:
        asked = deps.runs.get(request.run_id)
        if asked is None:
            return {"status": "refused", "reason": f"no run {request.run_id}"}
        runs = [asked]
    else:
        runs = deps.runs.list(request.limit)
    now = deps.clock()
    nodes = deps.store.list_nodes(deps.settings.membership_max_age_seconds, now)
    groups: dict[str, Any] = {"cluster_groups": []}
    try:
        raw = deps.aws.autoscaling.cluster_groups(deps.settings.cluster_name)
        described = deps.aws.ec2.describe(i["InstanceId"] for g in raw for i in g.get("Instances", []))
        markets = {iid: instance.lifecycle for iid, instance in described.items()}
        groups["cluster_groups"] = group_rows(raw, deps.settings.cluster_name, markets)
    except (AwsRequestError, AwsUnavailableError) as err:
        groups["cluster_groups_error"] = str(err)
    record = {"run_record": runs[0].model_dump(mode="json")} if request.run_id else {}
    return {
        "status": "ok",
        **groups,
        **record,
        "runs": [run_summary(r, steps=(i == 0)) for i, r in enumerate(runs)],
        "lock": deps.lock.current(),
        "ledger": list(deps.store.query_prefix("COMP#", consistent=True)),
        "membership": [
            {
                "instance_id": n.instance_id,
                "node_name": n.node_name,
                "asg": n.asg_name,
                "ready": n.ready,
                "unschedulable": n.unschedulable,
                "ending": n.ending,
                "roles": n.roles,
            }
            for n in sorted(nodes, key=lambda n: (n.asg_name or "", n.node_name))
        ],
    }


def cancel(
    request: CancelRequest, deps: RefresherDeps, budget_seconds: float, invocation: str | None = None
) -> dict[str, Any]:
    """Ask the run to stop: steps in flight are finished or undone, then it ends ``cancelled``.

    A cancel whose save is refused (``RunRecordRefusedError``: the run's item no longer fits) is not lost: the small
    write of ``lambdas.common.refused`` marks the run ``cancel_requested`` (``cancelling``) with the reason, the run
    is advanced as for any cancel, and the response carries ``refusal`` (the CLI prints it and exits 1).
    """
    refusal: dict[str, str] = {}
    for _ in range(10):
        run = deps.runs.get(request.run_id) if request.run_id else deps.runs.active()
        if run is None or not run.status.active:
            return {"status": "refused", "reason": f"no active run{' ' + request.run_id if request.run_id else ''}"}
        try:
            deps.runs.save(run.model_copy(update={"cancel_requested": True, "updated_at": deps.clock()}))
        except RunConflictError:
            continue
        except RunRecordRefusedError as err:
            telemetry = deps.effects().telemetry
            recorded = record_refused(
                deps.runs, run, err, deps.clock(), telemetry=telemetry, logger=logger, cancel=True
            )
            if recorded is None:
                continue  # another invocation saved first: cancel what it saved
            refusal = {"refusal": refusal_reason(err, "cancelling")}
        logger.info(f"run {run.run_id}: cancel requested")
        out = advance_run(deps, run.run_id, budget_seconds, invocation)
        return {**out, **refusal, "status": "cancel_requested"}
    raise RunConflictError("the run kept changing while cancelling; try again")


def wake_replacement(deps: RefresherDeps, budget_seconds: float, invocation: str | None = None) -> dict[str, Any]:
    """A rebalance command's result (``REBALANCE_POLICY=replace``: the interruption Lambda started a replacement run,
    then sent the rebalance cordon whose result this is): advance the active run when it is a replacement run
    (trigger ``rebalance``), so its surge starts about a second after the recommendation instead of at the next
    tick; anything else is acknowledged (``no_replacement_run``)."""
    active = deps.runs.active()
    if active is None or active.options.trigger != REBALANCE_TRIGGER:
        return {"status": "acknowledged", "reason": "no_replacement_run"}
    return advance_run(deps, active.run_id, budget_seconds, invocation)


def waits_on(run: Run, trigger: Event) -> bool:
    """Whether a "Node Ready" report may concern ``run`` (pure): it names a node whose group the agent could not tell,
    a node of one of the run's groups that is not an old instance of the run (a spare, or a node counted among the
    Ready ones a step needs), the run's spare, or an old instance of the run while a step counts Ready nodes (waits
    ``nodes_ready`` or ``master_ready``, or a master step settling). An old instance becoming Ready changes nothing
    else a decision looks at (a drain, a surge, a termination do not read it), so a report of old nodes alone (the
    agent's first report after it starts names every node) costs no pass. Masters of groups outside the run and
    nodes of other groups are left to the run's slow poll and the tick: no decision of a run looks at them but the
    masters' check."""
    groups = {g.name for g in run.groups}
    # each read in C over every step (a thousand, a report)
    olds = set(map(_INSTANCE_ID, run.steps))
    spares = set(filter(None, map(_SPARE, run.steps)))
    names = (
        trigger.asg_names if len(trigger.asg_names) == len(trigger.instance_ids) else ("",) * len(trigger.instance_ids)
    )
    counting: bool | None = None  # worked out for the first old instance reported (a spare's report needs none)
    for instance_id, group in zip(trigger.instance_ids, names, strict=True):
        if instance_id in olds and instance_id not in spares:
            if counting is None:
                counting = _counting(run)
            if counting:
                return True
            continue
        if not group or group in groups or instance_id in spares:
            return True
    return not trigger.instance_ids and any(not g or g in groups for g in trigger.asg_names)


def _counting(run: Run) -> bool:
    """Whether a step of ``run`` counts Ready nodes (``waits_on``): the steps not final picked in C, each looked at (a
    pending one too: hundreds)."""
    moving = compress(run.steps, map(_NOT_FINAL, map(_STATE, run.steps)))
    return any(s.state is StepState.SETTLING or COUNTING_WAITS & set(s.waiting_since) for s in moving)


_INSTANCE_ID, _SPARE, _STATE = attrgetter("instance_id"), attrgetter("surge_instance_id"), attrgetter("state")
_NOT_FINAL = frozenset(s for s in StepState if not s.final).__contains__
# the waits whose end a Ready node of the run's old instances may bring (``decide.worker.surging``,
# ``decide.replace.draining``, ``decide.master``)
COUNTING_WAITS = frozenset({WaitDeadline.NODES_READY.value, WaitDeadline.MASTER_READY.value})


def node_ready(trigger: Event, deps: RefresherDeps, budget: float, invocation: str) -> dict[str, Any]:
    """The agent's "Node Ready" report: advance the active run when the report may concern it (``waits_on``).

    The report is a hint to read again, never a fact: the pass reads membership (``NODE#``) and the groups itself
    and decides on what it read, so a report the agent's role could forge (it may put events of its own source and
    write ``NODE#``, nothing more) makes the refresher look, never act on a node that is not Ready. No active run
    (the common case: nodes become Ready all day long) costs one Query (``snapshot.read_state``: the ``LOCK`` item,
    the pollers, the active runs), nothing else; a report that concerns the run starts its first pass from that read.
    """
    if trigger.cluster != deps.settings.cluster_name:
        return {"status": "acknowledged", "reason": "other_cluster"}
    state = read_state(deps.store, deps.runs)
    active = state.run(None)
    if active is None:
        return {"status": "acknowledged", "reason": "no_active_run"}
    if not waits_on(active, trigger):
        return {"status": "acknowledged", "reason": "not_in_run"}
    return advance_run(deps, active.run_id, budget, invocation, state)


def serve(trigger: Event, deps: RefresherDeps, budget: float, invocation: str | None = None) -> dict[str, Any]:
    """Answer one invocation (see ``handler``'s module docstring for the responses): a manual request (status,
    cancel, refresh), the schedule (start a run), the tick (free an orphan lock, advance the active run), an agent
    result, a launch or a "Node Ready" report (advance the run it concerns).

    Args:
        trigger: the parsed input.
        deps: settings, adapters, clock.
        budget: seconds this invocation may spend polling for waits worth polling.
        invocation: this invocation's id (the Lambda request id; default a new one): its cluster-lock holder is
            ``refresher:<run id>:<invocation>``, so concurrent invocations of one run are distinct holders.
    """
    settings = deps.settings
    invocation = invocation or new_invocation_id()
    if trigger.kind is EventKind.REQUEST:
        request = trigger.request
        if request is None or request.cluster != settings.cluster_name:
            cluster = None if request is None else request.cluster
            return {
                "status": "rejected",
                "reason": "other_cluster",
                "error": f"this function refreshes {settings.cluster_name!r}, not {cluster!r}",
            }
        if isinstance(request, StatusRequest):
            return status(request, deps)
        if isinstance(request, CancelRequest):
            return cancel(request, deps, budget, invocation)
        refusals = request_refusals(request, settings)
        if refusals:  # nothing planned, nothing written: logged and counted like any invalid request
            err = InvalidRequestError(
                f"refresh request beyond what the settings allow: {'; '.join(refusals)}", refusals
            )
            return rejected(err, logger, deps.effects().telemetry, "RequestsRejected")
        return start(options_of(request, settings, "manual"), request.dry_run, deps, budget, invocation)
    if trigger.kind is EventKind.SCHEDULE:
        return start(options_of(None, settings, "schedule"), False, deps, budget, invocation)
    if trigger.kind is EventKind.TICK:
        released = free_orphan_lock(deps)
        out = advance_run(deps, None, budget, invocation)
        return {**out, "released_lock": released} if released else out
    if trigger.kind is EventKind.DRAIN_FINISHED:
        if trigger.cluster != settings.cluster_name:
            return {"status": "acknowledged", "reason": "other_cluster"}
        if (trigger.command_id or "").startswith("rebalance-"):
            return wake_replacement(deps, budget, invocation)
        if not (trigger.command_id or "").startswith("refresh-"):
            return {"status": "acknowledged", "reason": "not_ours"}
        out = advance_run(deps, None, budget, invocation)
        return out if out["status"] != "idle" else {"status": "acknowledged", "reason": "no_active_run"}
    if trigger.kind is EventKind.LAUNCH_SUCCEEDED:
        # nothing to read: a surge records its spare's launch wait itself (``decide.worker.start_workers``), so a
        # launch ends no wait a pass must record; the spare's "Node Ready" advances the run, and the tick enforces
        # the launch's deadline when neither comes
        return {"status": "acknowledged", "reason": "recorded_at_surge"}
    if trigger.kind is EventKind.NODE_READY:
        return node_ready(trigger, deps, budget, invocation)
    raise AssertionError(f"unhandled trigger {trigger.kind}")
