"""The world a refresh run's next decision needs (``gather``), read for ``lambdas.refresher.advance``: the cluster's
groups, the membership the pass read, the run's commands and the groups a compensation holds."""

from __future__ import annotations

from pydantic import ValidationError

from adapters.dynamo import ledger as ledger_store
from core.ledger import DonorState
from core.model import NodeRecord
from core.runs import Run, StepState
from lambdas.refresher.deps import RefresherDeps, logger
from lambdas.refresher.gather import read_groups
from lambdas.refresher.passes import looked_at_commands, may_start_a_group
from lambdas.refresher.world import World


def donor_groups(deps: RefresherDeps) -> frozenset[str]:
    """Groups a ``COMP#`` ledger has raised (or means to raise) for a compensation and not yet restored. An
    unreadable ledger is logged and left out (the replenisher reports it too)."""
    donors: set[str] = set()
    for item in deps.store.query_prefix(ledger_store.PREFIX, consistent=True):
        try:
            ledger = ledger_store.from_item(item)
        except ValidationError as err:
            logger.warning(f"unreadable ledger {item.get('sk')} ignored", extra={"error": str(err)})
            continue
        if ledger.compensation is not None:
            donors |= {n for n, d in ledger.compensation.donors.items() if d.state is not DonorState.RESTORED}
    return frozenset(donors)


def gather(
    run: Run,
    deps: RefresherDeps,
    membership: list[NodeRecord] | None = None,
    states: list[StepState] | None = None,
    confirmed: bool = False,
) -> World:
    """The world a run's next decision needs: every group of the cluster (the masters' check needs them all),
    fresh membership (``membership`` when the caller read it already, ``confirmed`` when a fresh ``MEMBERSHIP`` mark
    made it the agent's whole list: ``World.membership_confirmed``), the ``CMD#`` items of the run's unfinished
    commands, the groups carrying a compensation (only read when a group may be surged for the first time:
    ``may_start_a_group``). ``states``: ``[s.state for s in run.steps]``, when the caller has them. What a read
    repeats of the last is taken from the environment's ``deps.gather_memo`` (``gather.GatherMemo``: the groups'
    facts, and the Ready ids found of the membership memo's own map when it comes again).

    Calls: DescribeAutoScalingGroups (1 per 100 groups), the ``NODE#`` Query (unless given), one GetItem per command
    a decision looks at (``looked_at_commands``), the ``COMP#`` Query (only then).

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: reads failed.
    """
    now = deps.clock()
    memo = deps.gather_memo  # the execution environment's (``gather.GatherMemo``)
    groups = read_groups(deps.aws.autoscaling, deps.aws.ec2, deps.settings.cluster_name, memo)
    if membership is None:  # read here: whether the mark confirms it is not asked (nothing judged by absence)
        membership, confirmed = deps.store.list_nodes(deps.settings.membership_max_age_seconds, now), False
    nodes = deps.memo.by_instance(membership)  # keyed once a read (shared: World never changes it)
    if memo.ready_nodes is not nodes:  # the memo's map again (a read it reused): the groups' Ready ids found are kept
        memo.ready_nodes, memo.ready_live = nodes, {}
    commands = {}
    for command_id in looked_at_commands(run, states):
        item = deps.store.get_command(command_id)
        if item is not None:
            commands[command_id] = item
    donors = donor_groups(deps) if may_start_a_group(run, states) else frozenset()
    return World(
        groups=groups,
        nodes=nodes,
        membership_confirmed=confirmed,
        commands=commands,
        donors=donors,
        ready_live=memo.ready_live,
    )
