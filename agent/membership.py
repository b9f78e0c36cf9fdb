"""The membership reporter: keeps one ``NODE#<instance-id>`` item per Kubernetes node, saying which node is which
instance in which Auto Scaling group, whether it is Ready and whether it is cordoned.

The Lambdas read these items to turn an instance id (all an EC2 or Auto Scaling event carries) into a node, and to
count Ready nodes per group. Each item carries ``reported_at`` and a TTL of ``MEMBERSHIP_TTL_SECONDS``; readers
compare ``reported_at`` themselves (``NodeRecord.fresh``), since TTL deletion lags.

Only what changed is written. The reporter remembers what each item holds (read from the table at the first list
of a leadership term, then its own writes) and writes an item when its content changed, or when it is old enough
that its TTL would lapse before the next chance (``refresh_due``: at an age fixed per instance between half and
all of ``TTL - 2 x resync``, so items written together are refreshed over several confirmations, not all at once).
Every ``MEMBERSHIP_RESYNC_SECONDS`` one ``MEMBERSHIP`` item (``adapters.dynamo.nodes``) marks the whole membership
confirmed; readers take a record as fresh by the later of its own ``reported_at`` and that mark. An unchanged
cluster of 2,000 nodes costs one write a minute plus about 2,000 x resync / (0.75 x TTL) refreshes (about 2 with
the default TTL of a day), instead of 2,000 writes.

Between two lists (``resync``, every ``MEMBERSHIP_RELIST_SECONDS``) the watch's events are the reporter's view
(``agent.membership_loop``): a confirmation (``confirm``) writes only the items whose refresh came due (a heap of
due times, ``_due``) or whose group a due recheck found changed, then the mark. Its cost follows what changed, not
the cluster's size.

The mark also carries the reporter's ``version`` of the ``NODE#`` items (a term chosen at its start and the count of
the items it created, changed or deleted; a refresh of an unchanged item is not counted): a Lambda that finds the
version it read last answers the records it read then instead of reading them again
(``adapters.dynamo.nodes.read_membership``). A change made by the watch between two resyncs sets the mark's version
at once (``set_membership_version``). With the version the mark lists the reporter's last ``JOURNAL_CHANGES``
changes (``changes``: each one's number and item key), so a reader a few changes behind (the refresher's pass, the
replenisher's tick) matches only those items of its Query (``NodeRecordMemo.patched``).

A record written Ready over one NotReady or absent is told to ``on_ready`` (``agent.ready``: the "Node Ready" event
that wakes a refresh run waiting for the node) once the mark's version covers its write, so the run that report
wakes reads the item.

Pure part (``agent.membership_records``): ``node_identity``, ``node_roles``, ``node_record``,
``membership_records``, ``instances_to_forget``, ``batches``, ``refresh_due`` (nodes + ASG map in, records out).
I/O part: ``MembershipReporter`` (a watch on Nodes,
a confirmation every resync, and a list every relist that writes the items that changed or are due, deletes items
of instances that have no node, and writes the mark), with ``agent.asglookup.AsgLookup`` for each instance's group
(DescribeAutoScalingInstances, cached; a known group asked again every ``ASG_RECHECK_RESYNCS`` resyncs, the first
time after 5-10, spread per instance).

Node → instance comes from ``spec.providerID`` (``aws:///<az>/<instance-id>``), never from the node's name, so
nodes named by private DNS (``ip-10-0-1-17.ec2.internal``) or by instance id (``i-0abc...``) both work. Nodes
without an AWS providerID (not yet initialised by the cloud provider, or not on AWS) are skipped and logged once.
"""

from __future__ import annotations

import heapq
import logging
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime
from itertools import compress, repeat
from operator import itemgetter, ne
from typing import Any

from adapters.aws.ports import GroupReader
from adapters.dynamo.node_memo import Change
from adapters.dynamo.nodes import JOURNAL_CHANGES, node_sk
from adapters.dynamo.store import Store
from agent.asglookup import AsgLookup
from agent.kube.views import NodeView
from agent.membership_loop import NodeSource, WatchLoop
from agent.membership_records import (
    Basis,
    due_at,
    instances_to_forget,
    listed_instances,
    node_identity,
    node_record,
    refresh_age_seconds,
    refresh_due,
    same_basis,
    same_content,
    unchanged,
)
from agent.ready import became_ready
from core.model import NodeRecord, utcnow
from core.settings import AgentSettings

log = logging.getLogger(__name__)

# each instance's group is asked again every 10 resyncs, not every resync; the first time after 5-10 (its spread), so
# the instances of a first list are not asked again at once (``agent.asglookup``)
ASG_RECHECK_RESYNCS = 10
_GROUP = itemgetter(2)  # of a basis (``MembershipReporter._basis``)
_NO_BASIS = (None, None, object(), None)  # an instance without one: its group differs from every answer


class MembershipReporter(WatchLoop):
    """Watches Nodes and keeps the ``NODE#`` items current (see the module docstring).

    Args:
        nodes: node reads (``KubeAdapter``).
        store: the cluster's table access.
        asgs: instance → ASG lookup.
        resync_seconds: period of the confirmation, the ``MEMBERSHIP`` mark (``MEMBERSHIP_RESYNC_SECONDS``).
        ttl_seconds: TTL of each item (``MEMBERSHIP_TTL_SECONDS``).
        clock: current UTC time; injectable for tests.
        on_resync: called with the number of nodes reported after each successful resync (the metrics gauge,
            the CloudWatch heartbeat the "agent silent" alarm watches, the readiness probe's "Kubernetes
            reached"); must not raise.
        terms: makes each term, the first half of the mark's ``version``: the first at construction, then one at each
            ``new_term`` (default: 12 random hex digits, so a restart or a new leader never repeats a version); the
            simulation passes a counter of its own (no clock or seed), so one seed is one run.
        relist_seconds: period of the full list of the nodes (``MEMBERSHIP_RELIST_SECONDS``; default
            ``resync_seconds``: every confirmation a list).
    """

    def __init__(
        self,
        nodes: NodeSource,
        store: Store,
        asgs: AsgLookup,
        resync_seconds: float,
        ttl_seconds: int,
        clock: Callable[[], datetime] = utcnow,
        on_resync: Callable[[int], None] | None = None,
        relist_seconds: float | None = None,
        terms: Callable[[], str] | None = None,
    ) -> None:
        self.on_resync = on_resync
        self.on_error: Callable[[BaseException], None] | None = None  # counts the errors ``run`` survives
        # told each record written that makes its node Ready (``agent.ready``: the "Node Ready" report), after the write
        self.on_ready: Callable[[NodeRecord], None] | None = None
        self.nodes = nodes
        self.store = store
        self.asgs = asgs
        self.resync_seconds = resync_seconds
        self.relist_seconds = max(resync_seconds, relist_seconds or resync_seconds)
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self._written: dict[str, NodeRecord] = {}  # instance id -> what its NODE# item holds
        self._seeded = False  # _written was read from the table in this term
        self._warned: set[str] = set()  # node names logged as having no AWS providerID
        # instance id -> (the node's view and fields last compared, its group, when its item is due again): what
        # the item (``_written``) was last found to match; dropped whenever the item changes otherwise (``_write``),
        # and at a new term's read of the table where the item read is not the one it matched (``_seed``)
        self._basis: dict[str, Basis] = {}
        # (when an item is due again, instance id): a heap of the bases' due times; an entry counts only while its
        # time is its basis's (``confirm``), older ones are dropped as they come up
        self._due: list[tuple[datetime, str]] = []
        self._present: set[str] = set()  # the instances with a node: the last list's, then the watch's
        self._identities: dict[str, str] = {}  # providerID -> its instance id (``node_identity``; the AWS ones listed)
        self._watch: Any = None  # the open watch, closed by ``close`` from another thread
        # the mark's ``version`` (``adapters.dynamo.nodes``): this reporter's term and its NODE# changes so far
        self._terms = terms or (lambda: uuid.uuid4().hex[:12])
        self._term = self._terms()
        self._changes = 0
        self._published = False  # a mark carried a version of this term
        self._ready: list[NodeRecord] = []  # written Ready, told to ``on_ready`` once the version says so
        # the last changes counted in the version, as the mark lists them (``adapters.dynamo.nodes``, ``changes``)
        self._journal: deque[Change] = deque(maxlen=JOURNAL_CHANGES)

    @property
    def version(self) -> str:
        """What the ``MEMBERSHIP`` mark says of the ``NODE#`` items this reporter wrote: ``<term>:<changes>``, each
        put of a new or changed record and each delete counted before its call (one that failed after reaching the
        table is counted too). A refresh of an unchanged item (``refresh_due``: its times only) is not a change."""
        return f"{self._term}:{self._changes}"

    @classmethod
    def from_settings(
        cls,
        settings: AgentSettings,
        nodes: NodeSource,
        store: Store,
        autoscaling: GroupReader,
        on_resync: Callable[[int], None] | None = None,
    ) -> MembershipReporter:
        return cls(
            nodes,
            store,
            AsgLookup(autoscaling),
            settings.membership_resync_seconds,
            settings.membership_ttl_seconds,
            on_resync=on_resync,
            relist_seconds=settings.membership_relist_seconds,
        )

    def new_term(self) -> None:
        """Read the items from the table again at the next list (a new leadership term, or after an error: another
        leader may have written meanwhile), under a new term of the version once this one was published: a reader
        that kept an answer at a version of the old term never takes it for the new term's (another leader may
        have changed the items in between, and its versions are of its own term)."""
        self._seeded = False
        if self._published:
            self._term, self._changes, self._published = self._terms(), 0, False
            self._journal.clear()  # the new term's changes only

    def resync(self) -> str:
        """List the nodes a page at a time, refresh their ASGs, write the items that changed or are due
        (``refresh_due``), delete items of instances with no node, then write the ``MEMBERSHIP`` mark.

        Returns the list's resourceVersion (to watch from). Raises what the list, the ASG lookup or the table
        raise (``run`` logs it and lists again).
        """
        listed_at = self.clock()
        if not self._seeded:
            self._seed()
        ids: list[str] = []
        resource_version = ""
        written = 0
        known = self._identities  # providerID -> instance id (pure: kept across lists, pruned below)
        recheck = ASG_RECHECK_RESYNCS * self.resync_seconds
        ripe: dict[str, datetime] = {}  # the bases found due (``_ripe``), until their node is listed
        for page, page_version in self.nodes.list_node_pages():
            resource_version = page_version
            listed, page_ids = listed_instances(page, known, self._identity)
            asg_by_instance = self.asgs.resolve(page_ids, recheck_seconds=recheck)
            now = self.clock()
            bases = self._ripe(now, ripe)
            for node, instance_id in zip(listed, page_ids, strict=True):
                asg_name = asg_by_instance[instance_id]  # resolve answers every instance asked
                if same_basis(bases.get(instance_id), node, asg_name) and instance_id not in ripe:  # ``_unchanged``
                    continue
                ripe.pop(instance_id, None)  # its next due time is the one ``_report`` sets
                written += self._report(node, instance_id, asg_name, now)
            ids.extend(page_ids)
        for instance_id, at in ripe.items():  # due, not listed: left for the next confirmation
            if (basis := self._basis.get(instance_id)) is not None and basis[3] == at:
                heapq.heappush(self._due, (at, instance_id))
        present = set(ids)
        self._present = present
        if len(known) > 2 * len(present) + 100:  # many nodes gone: keep the providerIDs of this list's instances
            self._identities = {pid: instance_id for pid, instance_id in known.items() if instance_id in present}
        if self.asgs.cached() > len(present):  # it holds every listed instance (resolved above): others too
            self.asgs.retain(present)
        # items of instances not listed (only those can go), as before the list: each listed one has an item by now
        unlisted = self._written.keys() - present if len(self._written) > len(present) else set()
        recorded = {iid: self._written[iid].reported_at for iid in unlisted}
        gone = sorted(instances_to_forget(recorded, present, listed_at))
        for instance_id in gone:
            self._forget(instance_id)
        self.store.put_membership_mark(
            listed_at, len(ids), self.ttl_seconds, version=self.version, changes=self._journal
        )
        self._published = True
        self._announce()
        log.info("membership resync nodes=%d written=%d forgotten=%s", len(ids), written, gone)
        if self.on_resync is not None:
            self.on_resync(len(ids))
        return resource_version

    def _ripe(self, now: datetime, ripe: dict[str, datetime]) -> dict[str, Basis]:
        """The bases whose item is due at ``now`` put in ``ripe`` (instance id -> its due time) as ``confirm`` finds
        them (``_due``, each basis's due time a heap entry): a list reads no node's due time. Returns ``_basis``."""
        due, bases = self._due, self._basis
        while due and due[0][0] <= now:
            at, instance_id = heapq.heappop(due)
            basis = bases.get(instance_id)
            if basis is not None and basis[3] == at:  # else written or forgotten since: an older entry
                ripe[instance_id] = at
        return bases

    def _seed(self) -> None:
        """``_written`` read from the table (a new term: another leader may have written meanwhile). A basis stays
        only where the item read holds what the basis was compared with (``same_content`` and the same
        ``reported_at``: all ``_report`` reads of it), so the list after an error compares a field tuple a node, not a
        record built a node, and decides as comparing every node anew does; an item another writer changed or
        deleted loses its basis, its node is compared against the item read."""
        before = self._written
        self._written = written = {record.instance_id: record for record in self.store.recorded_nodes()}
        kept: dict[str, Basis] = {}
        for instance_id, basis in self._basis.items():
            old, new = before.get(instance_id), written.get(instance_id)
            if old is not None and new is not None and new.reported_at == old.reported_at and same_content(old, new):
                kept[instance_id] = basis
        self._basis = kept
        self._due = [(basis[3], instance_id) for instance_id, basis in kept.items()]
        heapq.heapify(self._due)
        self._seeded = True

    def confirm(self) -> None:
        """Between two lists: write the items whose refresh came due (``_due``) and those whose group a due
        recheck found changed (``AsgLookup.recheck``), then the ``MEMBERSHIP`` mark. No node is listed: the watch keeps
        the reporter's view (``agent.membership_loop``).

        Raises what the ASG lookup or the table raise (``run`` logs it and lists again).
        """
        confirmed_at = now = self.clock()
        written = 0
        regrouped = self.asgs.recheck(ASG_RECHECK_RESYNCS * self.resync_seconds)
        based = self._basis.get  # each basis read as the loop comes to it (a report before changes only its own)
        groups = map(_GROUP, map(based, regrouped, repeat(_NO_BASIS)))
        for instance_id in compress(regrouped, map(ne, groups, regrouped.values())):  # those in C, not a step each
            basis = based(instance_id)
            if basis is not None:  # detached, or the lookup failed before
                written += self._report(basis[0], instance_id, regrouped[instance_id], now)
        due, bases = self._due, self._basis
        ripe = []  # taken first: an item refreshed now may be due again now (a TTL under two resyncs: age 0)
        while due and due[0][0] <= now:
            ripe.append(heapq.heappop(due))
        for at, instance_id in ripe:
            basis = bases.get(instance_id)
            if basis is not None and basis[3] == at:  # else written or forgotten since: an older entry
                written += self._report(basis[0], instance_id, basis[2], now)
        if len(due) > 2 * len(bases) + 64:  # many older entries: the bases' own times only
            self._due = [(basis[3], instance_id) for instance_id, basis in bases.items()]
            heapq.heapify(self._due)
        count = len(self._present)
        self.store.put_membership_mark(
            confirmed_at, count, self.ttl_seconds, version=self.version, changes=self._journal
        )
        self._published = True
        self._announce()
        log.debug("membership confirmed nodes=%d written=%d", count, written)
        if self.on_resync is not None:
            self.on_resync(count)

    def apply(self, event_type: str, node: NodeView) -> None:
        """Apply one watch event: write the node's item if its content changed; delete it when the node is gone."""
        identity = self._identity(node)
        if identity is None:
            return
        instance_id = identity[1]
        if event_type == "DELETED":
            log.info("node deleted node=%s instance_id=%s", node.name, instance_id)
            self._forget(instance_id)
            self._versioned()
            return
        if event_type not in ("ADDED", "MODIFIED"):
            return
        asg_name = self.asgs.resolve([instance_id]).get(instance_id)
        changes, now = self._changes, self.clock()
        if not unchanged(self._basis.get(instance_id), node, asg_name, now):
            self._report(node, instance_id, asg_name, now)
        self._present.add(instance_id)
        if self._changes != changes:
            self._versioned()

    def _versioned(self) -> None:
        """After a write between two marks (the watch's): the mark's version set to this one, then the nodes it
        made Ready told (a reader a "Node Ready" report wakes finds the version changed, so it reads the item)."""
        self._published |= self.store.set_membership_version(self.version, changes=self._journal)
        self._announce()

    def _announce(self) -> None:
        ready, self._ready = self._ready, []
        if self.on_ready is not None:
            for record in ready:
                self.on_ready(record)

    def _report(self, node: NodeView, instance_id: str, asg_name: str | None, now: datetime) -> int:
        """Write the node's record when its content changed or its item is due (``refresh_due``); 1 when written.

        Remembers what it compared (``_basis``: the node's fields, its group, the instant its item becomes due), so
        that ``resync`` builds a record only when one of them changed or the item is due: a steady cluster's resync
        costs a comparison of a few fields a node, no model built, no time arithmetic, and decides as building the
        record and comparing it with ``same_content`` and ``refresh_due`` does.
        """
        previous = self._written.get(instance_id)
        record = node_record(node, asg_name, now)
        if record is None:
            return 0
        wrote = 0
        changed = previous is None or not same_content(previous, record)
        if changed or (previous is not None and refresh_due(previous, now, self.ttl_seconds, self.resync_seconds)):
            self._write(record, previous, changed)
            wrote = 1
        age = refresh_age_seconds(instance_id, self.ttl_seconds, self.resync_seconds)
        kept = (node.name, node.provider_id, node.ready, node.unschedulable, node.ending, dict(node.labels))  # copied
        due = due_at(self._written[instance_id].reported_at, age)
        self._basis[instance_id] = (node, kept, asg_name, due)
        heapq.heappush(self._due, (due, instance_id))
        return wrote

    def _identity(self, node: NodeView) -> tuple[str, str] | None:
        identity = node_identity(node)
        if identity is None and node.name not in self._warned:
            self._warned.add(node.name)
            log.warning("node has no AWS providerID, not reported node=%s provider_id=%r", node.name, node.provider_id)
        return identity

    def _write(self, record: NodeRecord, previous: NodeRecord | None, changed: bool) -> None:
        """Put ``record`` over ``previous`` (what its item held, None: no item), ``changed`` when their content
        differs (``same_content``: a change counted in the version), else a refresh of its times."""
        if changed:
            self._changes += 1  # before the call: a write that reached the table, then failed, changes it too
            self._journal.append((self._changes, node_sk(record.instance_id)))
        self.store.put_node(record, self.ttl_seconds)
        self._written[record.instance_id] = record
        self._basis.pop(record.instance_id, None)  # compared against the item it replaces (``_report`` sets it anew)
        if became_ready(previous, record):
            self._ready.append(record)  # told once the mark's version covers this write (``_announce``)

    def _forget(self, instance_id: str) -> None:
        self._present.discard(instance_id)
        self._changes += 1
        self._journal.append((self._changes, node_sk(instance_id)))
        self.store.delete_node(instance_id)
        self._written.pop(instance_id, None)
        self._basis.pop(instance_id, None)
