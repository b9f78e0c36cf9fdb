"""The replenisher's reads: one consistent query of each of the cluster's two partitions, the cluster's groups, and
EC2 only for what the decision needs (``gather``); the ``World`` it builds is all ``decide`` sees.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError

from adapters.aws.ports import AwsPort
from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.lock import LOCK_SK
from adapters.dynamo.node_memo import NodeRecordMemo
from adapters.dynamo.nodes import read_membership
from adapters.dynamo.runs import AS_IS as RUN_AS_IS
from adapters.dynamo.runs import OVER as RUN_OVER
from adapters.dynamo.store import Store
from adapters.dynamo.table import Attr, plain
from adapters.dynamo.values import plain_item
from core.clock import aware_time
from core.detach import DetachState
from core.kops import CLUSTER_TAG
from core.model import fresh_by_mark
from core.runs import Run
from core.settings import ReplenisherSettings
from lambdas.common.telemetry import Telemetry
from lambdas.replenisher.decide.cleanup import run_group_names, run_instances
from lambdas.replenisher.group_info import Seen, group_info
from lambdas.replenisher.listing import GroupInstances, group_instances
from lambdas.replenisher.own_commands import OwnCommands, needed_by_groups, needed_by_ledgers, read_own_commands
from lambdas.replenisher.unregistered import UnregisteredMemo, unregistered
from lambdas.replenisher.world import Detached, Group, World, run_active

log = logging.getLogger(__name__)

# a ``RUN#`` item as read, its ``Run``, the instances it names, its ``busy_groups`` and ``surge``, the groups it names
# (``GatherMemo.runs``)
RunRead = tuple[Mapping[str, Any], Run, frozenset[str], frozenset[str], dict[str, int], frozenset[str]]
# the ``DETACH#`` states that are over (``core.detach``): a week of early replacements' records, never converted
DETACH_OVER = frozenset({DetachState.TERMINATED.value, DetachState.GONE.value})
# what ``read_items`` asks DynamoDB to leave out, all items ``gather``'s loop skips unread: a ``DETACH#`` item that is
# over (``DETACH_OVER``; of the partition's kinds only ``DETACH#`` items have a ``state``) and a ``RUN#`` item of a
# run that is over (``runs.OVER``, as ``RunStore.active`` asks; only ``RUN#`` items have a ``run_id``). After a week
# at 1,000 nodes they are most of the partition: about 240 early replacements' records, and each finished refresh run
# (a weekly run's item is about 130 KB), which every tick sent and the Lambda parsed. Any other value is judged by
# the loop as before (an unknown run status counts as active, ``world.run_active``).
LEFT_OUT = ~Attr("state").is_in(sorted(DETACH_OVER)) & ~(Attr("run_id").exists() & Attr("status").is_in(RUN_OVER))


@dataclass
class GatherMemo:
    """What ``gather`` keeps between the invocations of one execution environment (``handler.Deps.memo``), each
    part holding only what the last read read (bounded by the membership and the groups' instances). Each part
    answers only for exactly what it was built from, so a read that finds it changed by another invocation in between
    still reads what it read.

    Attributes:
        nodes: the ``NodeRecord`` of each ``NODE#`` item last read, answered again only for an item with exactly the
            same record fields (``adapters.dynamo.node_memo``).
        groups: each group's ``Instances`` as last read, with the ``Instance`` objects made of them
            (``GroupInstances``): a list equal to it is answered with them, no look-up an instance (a refresh changes
            one group at a time; a quiet tick none). A list that changed is read with the group's ``Instance``
            objects of the last read for the entries it still holds (an instance stays in its group; one that moved
            is made anew, an equal value).
        runs: each active ``RUN#`` item last read (its sort key -> the item as the table answered it, the ``Run``
            made of it, the instances it names, ``run_instances``, its ``busy_groups`` and ``surge``, and the groups it
            names, ``cleanup.run_group_names``, each made of every step or group: a 1,000-step run's were 1 % of a
            tick, the groups 1 % as the cleanup made them every tick), answered again only for an item equal to it
            in every attribute. A refresh run's item is read every tick and changes a few times a step; made anew,
            a 1,000-step run was a twentieth of a simulated week at 1,000 nodes (BENCHMARKS.md, issue 12). The
            ``Run`` is shared between ticks: ``decide`` only reads it. "Equal" is Python's ``==``, under which a
            value retyped to an equal one (``True`` for ``1``) is the same: pydantic's lax reading makes the same
            field of both but for a row's node-name flag (``True``: the instance id; ``1`` is refused), a field
            the replenisher does not read; such an item reads as the run made before, not as unreadable.
        unregistered: each group's InService ids without a record, as judged against the membership map last read
            (``lambdas.replenisher.unregistered``).
        infos: each group's ``ManagedGroup`` with copies of what it was made of, by position (``group_info``).
        made: each group's ``Group`` as the last read made it (before any launch time ``gather`` adds), answered again
            for a group whose ``ManagedGroup`` and ``Instance`` tuple are the very objects it holds (this memo's own:
            ``infos`` and ``groups`` answered them again, each for equal fields) and whose sizes, creation time and
            run surge and busy flag, as made again, are equal to its own; else made anew. A quiet tick made every
            group's ``Group`` anew (a frozen dataclass of eight fields) and copied its ``GroupInstances``.
    """

    nodes: NodeRecordMemo = field(default_factory=NodeRecordMemo)
    runs: dict[str, RunRead] = field(default_factory=dict)
    groups: dict[str, GroupInstances] = field(default_factory=dict)
    unregistered: UnregisteredMemo = field(default_factory=UnregisteredMemo)
    infos: list[Seen | None] = field(default_factory=list)
    made: dict[str, Group] = field(default_factory=dict)


class GatherDeps(Protocol):
    """What ``gather`` reads through (``handler.Deps`` has it)."""

    @property
    def settings(self) -> ReplenisherSettings: ...

    @property
    def store(self) -> Store: ...

    @property
    def aws(self) -> AwsPort: ...

    @property
    def telemetry(self) -> Telemetry: ...

    @property
    def memo(self) -> GatherMemo: ...


def gather(deps: GatherDeps, now: datetime, logger: Any = None, tick: bool = False) -> World:
    """Read what ``decide`` needs (see ``world``'s module docstring for the calls); ``logger`` (the handler's
    Powertools Logger; default this module's) notes what it leaves out. The records of the ``NODE#`` items and the
    groups' ``Instance``s that did not change since the last read are the ones ``deps.memo`` kept (``GatherMemo``).
    ``tick``: for a tick, the replenisher's own commands are read only when ``decide`` may look at one
    (``own_commands``; else ``World.commands`` is empty); for any other event, always.

    Raises:
        StoreUnavailableError, AwsUnavailableError, AwsRequestError: reads failed.
    """
    logger = logger or log
    settings = deps.settings
    groups: dict[str, Group] = {}
    ledgers = {}
    commands: OwnCommands | None = None  # not read yet (``own_commands``)
    protected: set[str] = set()
    runs: list[Run] = []
    runs_unreadable = False
    lock = None
    detached: dict[str, Detached] = {}
    runs_read: dict[str, RunRead] = {}
    # as the table answered (``convert=False``): no item is converted before this loop keeps it, so the kinds not
    # read (``gathered``) are left out here
    for stored in read_items(deps.store):
        sk = str(stored.get("sk", ""))
        # first: most of the partition after a week (a week of early replacements' records, each looked at every tick)
        if sk.startswith("DETACH#") and stored.get("state") in DETACH_OVER:
            continue  # its instance terminated or gone: nothing to sweep or protect; the item waits for its TTL
        if not gathered(sk):
            continue
        if sk.startswith("RUN#") and not run_active(stored):
            continue  # a run that is over (its status a string either way): never converted, often a large item
        if sk.startswith("RUN#") and (last := deps.memo.runs.get(sk)) is not None and last[0] == stored:
            runs_read[sk] = last  # the same item as the last tick's: the same run, not made again
            runs.append(last[1])
            protected |= last[2]
            continue
        item = plain_item(stored, RUN_AS_IS) if sk.startswith("RUN#") else plain(stored)  # rows read by ``Run``
        try:
            if sk == LOCK_SK:
                lock = item
            elif sk.startswith(ledger_store.PREFIX):
                led = ledger_store.from_item(item)
                ledgers[led.asg_name] = led
            elif sk.startswith("RUN#"):  # an active one (above)
                try:
                    run = Run.model_validate(item)
                except ValidationError:
                    runs_unreadable = True
                    raise
                runs.append(run)
                names = frozenset(run_instances(run))
                protected |= names
                runs_read[sk] = (stored, run, names, run.busy_groups, run.surge, run_group_names((run,)))
            elif sk.startswith("DETACH#"):
                protected.add(sk[7:])
                detached[sk[7:]] = detached_record(sk[7:], item)
        except ValidationError as err:
            logger.warning(f"unreadable item {sk} ignored", extra={"error": str(err)})
            deps.telemetry.count_by("Skipped", "reason", "unreadable_item")
    if not tick or needed_by_ledgers(ledgers.values(), now):  # right after the partition, as they always were
        commands = read_own_commands(deps.store, deps.telemetry, logger)
    # membership after the LOCK item too: the mark, then the NODE# items unless this environment read them at the
    # mark's version already (``read_membership``); validated as read, not converted (``deps.memo.nodes``)
    mark, records, refused = read_membership(deps.store, deps.memo.nodes, now)
    # the groups after the partition (its LOCK item): another invocation that changes them after this read has to
    # take the lock after the read too, and the acquire (conditioned on the fencing read) then fails; read before
    # it, they could predate a raise the ledgers read already record (and a raise would read as a kOps reset)
    raw_groups = deps.aws.autoscaling.cluster_groups(settings.cluster_name)
    # fresh by its own write or by the agent's MEMBERSHIP mark (the agent writes a NODE# item only when it changes):
    # the records do not carry the mark (``NodeRecordMemo.records``), so a record's own ``fresh`` is its age by its
    # own write, and it is fresh when that or the mark is
    max_age = settings.membership_max_age_seconds
    for bad in refused:
        logger.warning(f"unreadable item {bad.sk} ignored", extra={"error": str(bad.error)})
        deps.telemetry.count_by("Skipped", "reason", "unreadable_item")
    # keyed once a read (a tick answered the same list, or a patched one: ``NodeRecordMemo.by_instance``), copied
    keyed = deps.memo.nodes.by_instance(records)
    nodes = dict(keyed)
    marked = fresh_by_mark(mark, now, max_age)  # a fresh mark makes every record it confirms fresh
    # the agent's whole list only when no item was left out unreadable (a node absent from ``nodes`` all the same)
    every = marked and not refused
    if not marked:
        nodes = {iid: record for iid, record in nodes.items() if record.fresh(now, max_age)}
    in_service: list[tuple[str, tuple[str, ...]]] = []
    kept_groups: dict[str, GroupInstances] = {}
    # each run's busy groups and surge once (each is made from every step and group of the run), not once a group,
    # nor again for a run read as before (``GatherMemo.runs``); a read's runs are those of ``runs_read``, in order
    busy = frozenset().union(*(read[3] for read in runs_read.values()))
    surges = [read[4] for read in runs_read.values()]
    infos, last_infos = [], deps.memo.infos
    for at, raw in enumerate(raw_groups):
        info, info_kept = group_info(raw, settings.cluster_name, last_infos[at] if at < len(last_infos) else None)
        infos.append(info_kept)
        if info is None:
            continue
        listed = raw.get("Instances", [])
        before = deps.memo.groups.get(info.name)
        if before is not None and before.listed is not listed and before.listed == listed:
            listing = kept_groups[info.name] = before  # equal to text: text (the list compared, kept as it was)
        else:  # the group's own Instances of the last read, by their four fields: the same fields, an equal value
            known = {} if before is None else dict(zip(before.keys, before.instances, strict=True))
            listing = group_instances(listed, known)
            if listing.listed is not None:
                kept_groups[info.name] = listing
        instances = listing.instances
        in_service.append((info.name, listing.in_service))
        desired, min_size, max_size = (
            int(raw.get("DesiredCapacity", 0)),
            int(raw.get("MinSize", 0)),
            int(raw.get("MaxSize", 0)),
        )
        run_surge, run_busy, created = (
            sum(surge.get(info.name, 0) for surge in surges),
            info.name in busy,
            str(raw.get("CreatedTime", "")),
        )
        made = deps.memo.made.get(info.name)
        if (  # the last read's Group when made of the same values (``GatherMemo.made``)
            made is not None
            and made.info is info
            and made.instances is instances
            and made.desired == desired
            and made.min_size == min_size
            and made.max_size == max_size
            and made.run_surge == run_surge
            and made.run_busy == run_busy
            and made.created == created
        ):
            groups[info.name] = made
        else:
            groups[info.name] = Group(
                info=info,
                desired=desired,
                min_size=min_size,
                max_size=max_size,
                instances=instances,
                run_surge=run_surge,
                run_busy=run_busy,
                created=created,
            )
    deps.memo.groups = kept_groups
    deps.memo.made = dict(groups)  # before any launch time is added below (a read's own, never kept)
    if commands is None:  # a tick's: needed only for a surplus master (``own_commands``), after the groups
        commands = (
            read_own_commands(deps.store, deps.telemetry, logger)
            if needed_by_groups(groups.values())
            else OwnCommands()
        )
    deps.memo.runs = runs_read
    deps.memo.infos = infos
    # judged against the shared map when ``nodes`` holds all of it (never changed: its answers kept), else ``nodes``
    missing = unregistered(deps.memo.unregistered, keyed if every else nodes, every, in_service)
    if missing and every:  # absence is judged only from a confirmed list (``World.membership_confirmed``)
        times = deps.aws.ec2.launch_times(sorted(missing))
        for name, group in list(groups.items()):
            groups[name] = replace(  # every other field as read (a field added to Group is never dropped here)
                group,
                instances=tuple(
                    i  # no launch time known: the Instance as read (its launch_time None)
                    if (launched := times.get(i.instance_id)) is None
                    else replace(i, launch_time=launched)
                    for i in group.instances
                ),
            )
    due = [
        iid
        for iid, rec in detached.items()
        if rec.state in (DetachState.INTENDED.value, DetachState.DETACHED.value, DetachState.TERMINATING.value)
        and rec.recorded_at is not None
        and (now - rec.recorded_at).total_seconds() > settings.detached_max_seconds
    ]
    if due:
        seen = deps.aws.ec2.describe(sorted(due))
        for iid in due:
            inst = seen.get(iid)
            detached[iid] = replace(
                detached[iid],
                asked=True,
                ec2_state=inst.state if inst else None,
                cluster_tag=inst.tags.get(CLUSTER_TAG) if inst else None,
            )
    return World(
        groups=groups,
        ledgers=ledgers,
        nodes=nodes,
        membership_confirmed=every,
        commands=commands.items,
        unreadable_commands=commands.unreadable,
        protected=frozenset(protected),
        active_runs=tuple(runs),
        run_groups=frozenset().union(*(read[5] for read in runs_read.values())),
        runs_unreadable=runs_unreadable,
        lock=lock,
        detached=detached,
    )


def compensation_active(store: Store) -> bool:
    """Whether any ``COMP#`` ledger carries a compensation (``core.ledger.Ledger.compensation`` not null), or is not
    one this reader can judge (its ``compensation`` present and not null): one consistent Query of the ``COMP#``
    items, not converted. ``decide.acknowledged`` asks it before a launch success's reconcile.

    Raises:
        StoreUnavailableError: the read failed.
    """
    return any(item.get("compensation") is not None for item in store.query_prefix(ledger_store.PREFIX, True, False))


def read_items(store: Store) -> Iterator[dict[str, Any]]:
    """The items of the cluster partition ``gather`` reads, as the table answered them (one consistent Query,
    paginated): ``LOCK`` first, then ``COMP#``, ``DETACH#``, ``POLL#``, ``RUN#``, but for two kinds that ``gather``
    leaves out unread, which DynamoDB leaves out of its answer (``LEFT_OUT``, a FilterExpression: still read and
    billed, neither sent nor parsed). The membership and the replenisher's own commands of the agent partition are
    read apart (``adapters.dynamo.nodes.read_membership``, ``own_commands.read_own_commands``).

    Raises:
        StoreUnavailableError: a read failed.
    """
    yield from store.query_cluster_partition(consistent=True, convert=False, keep=LEFT_OUT)


def gathered(sk: str) -> bool:
    """Whether ``gather``'s loop over ``read_items`` looks at the item ``sk``: the kinds it reads there (``LOCK``,
    ``COMP#``, ``RUN#``, ``DETACH#``); anything else is left unconverted. Pure."""
    return sk == LOCK_SK or sk.startswith((ledger_store.PREFIX, "RUN#", "DETACH#"))


def detached_record(instance_id: str, item: Mapping[str, Any]) -> Detached:
    """A ``DETACH#`` item as the sweep reads it (an unreadable time leaves ``recorded_at`` None: never swept)."""
    return Detached(
        instance_id=instance_id,
        asg_name=str(item.get("asg_name", "")),
        state=str(item.get("state", "")),
        recorded_at=aware_time(item.get("recorded_at")),
    )


def lock_free(lock: Mapping[str, Any] | None, now: datetime) -> bool:
    """True when nobody holds a valid lease on the cluster lock (never taken, released, or expired)."""
    if not lock or not lock.get("holder"):
        return True
    return float(lock.get("lease_expires_at", 0)) <= now.timestamp()
