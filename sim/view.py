"""What the invariant checker reads of a simulated world (``sim.world_view.WorldView``), read cheaply: nodes whose
``resourceVersion`` did not change are not parsed again, the table's partitions are read in place (issue 12).

The whole-cluster answers are made again only when what they describe changed. ``node_states`` and ``node_index``:
when the cluster's ``node_version`` or the operators' cordons moved, and then from the nodes kept since the last
answer (``Nodes``), reading again only the nodes the cluster's node events named since (``View._follow``: at 1,000
nodes a change of one node is not a walk over all of them). ``running_instances``, ``running_per_group``: when
``sim.aws_state.PlacementEpoch`` moved (an instance's state, group or zone set). ``verify`` compares every cached
answer with one made afresh (``AssertionError`` on a difference; the tests run seeds so).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agent.kube.views import CORDON_ANNOTATION, NodeView
from core.kops import INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS, POOL_TAG, pool_of
from core.model import CommandStatus
from core.schema import agent_item
from sim.aws_state import LIVE_EC2_STATES, Group, PlacementEpoch
from sim.kube_objects import CONTROL_PLANE_LABEL
from sim.left_raised import crash_excused
from sim.world_view import GroupState, NodeIndex, NodeState

# a command's statuses before it ended; a tuple, not a set: a forged status may be a list (unhashable)
_OPEN = tuple(s.value for s in CommandStatus if not s.terminal)

if TYPE_CHECKING:
    from sim.world import World


class Nodes:
    """Every node's state (``states``, in the cluster's order of its nodes) and what the ``NodeIndex`` is made of,
    kept from one answer to the next: ``put`` a node's new state, ``drop`` a node gone.

    Attributes:
        place: node -> a number growing in the nodes' order (a node added again goes last, as in the cluster).
        named: instance id -> the nodes naming it.
        ours: the nodes with our cordon annotation that are unschedulable.
        ready: the Ready workers.
        operators: the operators' cordons the states were read with.
        moved: whether (``instance_of``, ``ready``) changed since the last ``NodeIndex`` copied them.
    """

    def __init__(self) -> None:
        self.states: dict[str, NodeState] = {}
        self.instance_of: dict[str, str] = {}
        self.place: dict[str, int] = {}
        self.named: dict[str, dict[str, None]] = {}
        self.ours: dict[str, NodeState] = {}
        self.ready: set[str] = set()
        self.operators: frozenset[str] = frozenset()
        self.moved = (True, True)
        self._places = 0

    def put(self, state: NodeState) -> None:
        name = state.name
        old = self.states.get(name)
        if old is None:
            self.place[name] = self._places
            self._places += 1
        elif old.instance_id != state.instance_id:
            self._unname(old)
        if old is None or old.instance_id != state.instance_id:
            self.moved = (True, self.moved[1])
        self.states[name] = state
        self.instance_of[name] = state.instance_id
        self.named.setdefault(state.instance_id, {})[name] = None
        if state.ours and state.unschedulable:
            self.ours[name] = state
        else:
            self.ours.pop(name, None)
        ready = state.ready and not state.master
        if ready != (name in self.ready):
            self.moved = (self.moved[0], True)
            if ready:
                self.ready.add(name)
            else:
                self.ready.discard(name)

    def drop(self, name: str) -> None:
        old = self.states.pop(name, None)
        if old is None:
            return
        del self.instance_of[name], self.place[name]
        self._unname(old)
        self.ours.pop(name, None)
        self.moved = (True, self.moved[1] or name in self.ready)
        self.ready.discard(name)

    def _unname(self, old: NodeState) -> None:
        names = self.named[old.instance_id]
        del names[old.name]
        if not names:
            del self.named[old.instance_id]


class View:
    """``sim.world_view.WorldView`` over ``world``.

    Args:
        verify: check every cached whole-cluster answer against one made afresh (slow; for tests).
    """

    def __init__(self, world: World, partitions: tuple[str, ...], verify: bool = False) -> None:
        self.world = world
        self.partitions = partitions  # the cluster's (core.schema.partition_of, agent_partition_of)
        self.partition, self.agent_partition = partitions
        self.verify = verify
        self._groups: dict[str, tuple[tuple[Any, ...], GroupState]] = {}  # name -> (key, state): group_states
        self._node_cache: dict[str, tuple[tuple[Any, bool], NodeState]] = {}  # node -> (version, state)
        self._nodes: tuple[int, NodeIndex] | None = None  # (the node_version it was made at, the index)
        self._listed: tuple[NodeIndex, list[NodeState]] | None = None  # node_states, made for that index
        self._kept = Nodes()  # every node's state as of the last answer
        self._log_seen: int | None = None  # the resourceVersion of the last node event _kept was brought up to
        self._running: tuple[int, dict[str, tuple[str | None, str]], dict[str, int]] | None = None
        self._open: dict[str, str] | None = None  # CMD# sort key -> instance id, queued or running (``_on_write``)

    def _partition_of(self, sk: str) -> str:
        """The partition holding kind ``sk`` (``core.schema.partition_for``: the agent's kinds in its own)."""
        return self.agent_partition if agent_item(sk) else self.partition

    def group_states(self) -> list[GroupState]:
        """Each group's ``GroupState`` (``group_state``), the one made before again while what it is made of is the
        same: kept by group name with that key (the pool and instance-group tags, the master tags, zones and sizes:
        all ``group_state`` reads, so a pure result; one entry a group). A scan asks every few seconds."""
        kept, out = self._groups, []
        for g in self.world.cloud.groups.values():
            pool, group = g.tags.get(POOL_TAG), g.tags.get(INSTANCE_GROUP_TAG)
            key = (pool, group, _master(g), g.zones, g.desired, g.min_size, g.max_size)
            hit = kept.get(g.name)
            if hit is None or hit[0] != key:
                hit = kept[g.name] = (key, group_state(g))
            out.append(hit[1])
        return out

    def running_instances(self) -> dict[str, tuple[str | None, str]]:
        """instance id -> (its group, its AZ) for the pending and running instances; brought up (in place) only after
        an instance's state, group or zone was set (``PlacementEpoch``): an answer holds until the world moves."""
        return self._placements()[1]

    def running_per_group(self) -> dict[str, int]:
        return self._placements()[2]

    def _placements(self) -> tuple[int, dict[str, tuple[str | None, str]], dict[str, int]]:
        cached, epoch = self._running, PlacementEpoch.value
        if cached is not None and cached[0] == epoch:
            if self.verify:
                assert cached[1:] == self._placed(cached[0])[1:], "running_instances cached across a change"
            return cached
        changes = PlacementEpoch.changes
        if cached is None or not changes or changes[0][0] > cached[0] + 1:  # some changes since are not told
            self._running = cached = self._placed(epoch)
            return cached
        running, per_group = cached[1], cached[2]  # updated in place: callers read an answer before the world moves
        instances = self.world.cloud.instances
        seen = cached[0]
        for value, instance_id in reversed(changes):  # the newest first, back to the last answer's
            if value <= seen:
                break
            inst = instances.get(instance_id)  # the instance's place now (another world's id: its own, unchanged)
            now = (inst.group, inst.zone) if inst is not None and inst.state in LIVE_EC2_STATES else None
            was = running.pop(instance_id, None)
            if was is not None and was[0] is not None:
                per_group[was[0]] -= 1
                if not per_group[was[0]]:
                    del per_group[was[0]]
            if now is not None:
                running[instance_id] = now
                if now[0] is not None:
                    per_group[now[0]] = per_group.get(now[0], 0) + 1
        self._running = cached = (epoch, running, per_group)
        if self.verify:
            assert cached[1:] == self._placed(epoch)[1:], "running_instances brought up past a change it missed"
        return cached

    def _placed(self, epoch: int) -> tuple[int, dict[str, tuple[str | None, str]], dict[str, int]]:
        running = {
            i.instance_id: (i.group, i.zone) for i in self.world.cloud.instances.values() if i.state in LIVE_EC2_STATES
        }
        per_group: dict[str, int] = {}
        for group, _az in running.values():
            if group is not None:
                per_group[group] = per_group.get(group, 0) + 1
        return epoch, running, per_group

    def node_states(self) -> list[NodeState]:
        """Every node's state (the same list again while no node changed: callers only read it); a node whose
        ``resourceVersion`` did not change since it was last read is not read again."""
        index = self.node_index()
        if self._listed is None or self._listed[0] is not index:  # made when asked: a scan asks for the index only
            self._listed = (index, list(self._kept.states.values()))
        return self._listed[1]

    def node_index(self) -> NodeIndex:
        """The index at the cluster's ``node_version`` (and the operators' cordons): after a change only the nodes
        the cluster's node events name since the last answer are read (``_follow``); the index holds copies of what is
        kept (``Nodes``), made again only when they changed (a cordon changes neither Ready workers nor instances)."""
        version, operators = self.world.kube.node_version, self.world.operators
        cached = self._nodes
        if cached is not None and cached[0] == version and operators == self._kept.operators:
            if self.verify:
                self._check_nodes(cached[1])
            return cached[1]
        if not self._follow():
            self._kept = Nodes()
            for name, obj in self.world.kube.nodes.items():
                self._kept.put(self._node_state(name, obj))
            self._prune()
        kept = self._kept
        kept.operators = frozenset(operators)
        ours = tuple(sorted(kept.ours.values(), key=lambda n: kept.place[n.name]))
        instance_of, ready = kept.moved
        index = NodeIndex(
            dict(kept.instance_of) if instance_of or cached is None else cached[1].instance_of,
            ours,
            frozenset(kept.ready) if ready or cached is None else cached[1].ready_workers,
        )
        kept.moved = (False, False)
        self._nodes = (version, index)
        if self.verify:
            self._check_nodes(index)
        return index

    def _follow(self) -> bool:
        """Bring ``_kept`` up to the cluster's node events since it was last brought (``Cluster.node_log``) and the
        operators' cordons; False when the log may have dropped some of them (full, or kept none): read every node."""
        kube, kept = self.world.kube, self._kept
        log, seen = kube.node_log, self._log_seen
        self._log_seen = log[-1][0] if log else 0
        if seen is None or (log.maxlen is not None and len(log) >= log.maxlen and (not log or log[0][0] > seen)):
            return False
        events = []
        for rv, event in reversed(log):  # the newest first, as far back as the last follow
            if rv <= seen:
                break
            events.append(event)
        changed: dict[str, None] = dict.fromkeys(kept.operators ^ self.world.operators)
        added: dict[str, None] = {}  # the nodes (re-)added, in the order of their last addition: the nodes' order
        for event in reversed(events):
            name = event.node.name if event.node is not None else ""
            changed[name] = None
            if event.type in ("ADDED", "DELETED"):
                kept.drop(name)
                added.pop(name, None)
                if event.type == "ADDED":
                    added[name] = None
        nodes = kube.nodes
        for name in [*(n for n in changed if n not in added), *added]:
            obj = nodes.get(name)
            if obj is None:
                kept.drop(name)
                self._node_cache.pop(name, None)
            else:
                kept.put(self._node_state(name, obj))
        return True

    def _check_nodes(self, index: NodeIndex) -> None:
        fresh = self._read_nodes(fresh=True)
        listed = list(self._kept.states.values())
        assert listed == fresh and index == NodeIndex.of(fresh), "node_states kept across a change they missed"

    def _read_nodes(self, fresh: bool = False) -> list[NodeState]:
        nodes = self.world.kube.nodes
        return [self._node_state(name, obj, fresh) for name, obj in nodes.items()]

    def _prune(self) -> None:
        nodes, cache = self.world.kube.nodes, self._node_cache
        if len(cache) > 2 * len(nodes) + 100:
            for gone in [n for n in cache if n not in nodes]:
                del cache[gone]

    def nodes_of(self, instances: Collection[str]) -> list[NodeState]:
        """The states of the nodes whose instance (``spec.providerID``) is one of ``instances``, in the order of
        ``node_states`` (only those nodes are looked at: ``Nodes.named``)."""
        self.node_index()
        kept, node_instance = self._kept, self.world.kube.node_instance
        names = {name for i in instances for name in kept.named.get(i, ())}
        answer = [kept.states[name] for name in sorted(names, key=kept.place.__getitem__)]
        answer = [state for state in answer if node_instance.get(state.name) in instances]
        if self.verify:
            kube = self.world.kube
            every = [self._node_state(n, kube.nodes[n], True) for n, i in node_instance.items() if i in instances]
            assert answer == [s for s in every if s.instance_id in instances], "nodes_of kept across a change"
        return answer

    def _node_state(self, name: str, obj: dict[str, Any], fresh: bool = False) -> NodeState:
        """The node's state (read again only when its ``resourceVersion`` moved, or ``fresh``)."""
        meta = obj["metadata"]
        operator = name in self.world.operators
        key = (meta.get("resourceVersion"), operator)
        hit = self._node_cache.get(name)
        if hit is not None and hit[0] == key and not fresh:
            return hit[1]
        spec = obj["spec"]
        conditions = obj["status"].get("conditions", ())
        state = NodeState(
            name=name,
            instance_id=NodeView.from_api(obj).instance_id or "",
            master=CONTROL_PLANE_LABEL in meta["labels"],
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            unschedulable=bool(spec.get("unschedulable")),
            ours=CORDON_ANNOTATION in (meta.get("annotations") or {}),
            operator=operator,
            created=str(meta.get("creationTimestamp", "")),
        )
        self._node_cache[name] = (key, state)
        return state

    def running(self, instance_id: str) -> bool:
        """Whether the instance is pending or running (as ``running_instances`` has it)."""
        instance = self.world.cloud.instances.get(instance_id)
        return instance is not None and instance.state in LIVE_EC2_STATES

    def cluster_items(self) -> list[dict[str, Any]]:
        """The items of the cluster partition (``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#``, ``POLL#``: the kinds only
        the Lambdas write), in the order ``table_items`` gives them, read in place."""
        return list(self.world.table._items.get(self.partition, {}).values())

    def movable_pods(self, node: str) -> int:
        movable = 0
        for key in self.world.kube.by_node.get(node, {}):
            info = self.world.kube.pods[key]
            if info.workload and not info.terminating and info.obj["status"].get("phase") == "Running":
                movable += 1
        return movable

    def table_items(self) -> list[dict[str, Any]]:
        """The cluster's items (both its partitions), read in place (no copies: the checker only reads;
        ``MemoryTable.items`` copies every item, too slow for a scan every simulated minute at 1,000 nodes)."""
        items = self.world.table._items
        return [item for partition in self.partitions for item in items.get(partition, {}).values()]

    def table_prefix(self, prefix: str) -> list[dict[str, Any]]:
        """The items whose sort key starts with ``prefix``, from the partition of ``prefix``'s kind, read in place (a
        range of the table's sorted sort keys: the ``NODE#`` items are not looked at for ``CMD#``)."""
        table = self.world.table
        where = self._partition_of(prefix)
        order = table.sort_keys(where)
        partition = table._items.get(where, {})
        after = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return [partition[sk] for sk in order[bisect_left(order, prefix) : bisect_left(order, after)]]

    def open_command_instances(self) -> Collection[str]:
        """The instances of the ``CMD#`` items queued or running. Made from the partition at the first call, then
        kept by the table's writes (a ``MemoryDynamo`` listener): a scan does not go through a week of commands."""
        if self._open is None:
            self._open = {}
            for item in self.table_prefix("CMD#"):
                self._on_write(self.world.table.name, (self.agent_partition, str(item.get("sk", ""))), None, item)
            self.world.dynamo.listeners.append(self._on_write)
        answer = set(self._open.values())
        if self.verify:
            fresh = {str(i.get("instance_id")) for i in self.table_prefix("CMD#") if i.get("status") in _OPEN}
            assert answer == fresh, "open commands kept across a write they missed"
        return answer

    def _on_write(self, table: str, key: tuple[str, str], old: Any, new: dict[str, Any] | None) -> None:
        if self._open is None or table != self.world.table.name or key[0] != self.agent_partition:
            return
        if not key[1].startswith("CMD#"):
            return
        if new is not None and new.get("status") in _OPEN:
            self._open[key[1]] = str(new.get("instance_id"))
        else:
            self._open.pop(key[1], None)

    def table_item(self, sk: str) -> dict[str, Any] | None:
        """The item ``sk``, from its kind's partition, read in place."""
        return self.world.table._items.get(self._partition_of(sk), {}).get(sk)

    def outage_azs(self) -> frozenset[str]:
        t = self.world.kernel.t
        out = set()
        for o in self.world.cloud.outages:
            if o.start <= t < o.end:
                out.add(o.target if isinstance(o.target, str) else o.target[1])
        return frozenset(out)

    def baseline(self) -> dict[str, tuple[int, int]]:
        return dict(self.world.sizes_at_start)

    def restore_excused(self) -> dict[str, set[int]]:
        return crash_excused(self.world, self.table_prefix("RUN#"))

    def kops_taken(self) -> int:
        return self.world.kops_taken


def group_state(g: Group) -> GroupState:
    """The checker's ``GroupState`` of the simulated group ``g`` (the general path ``View.group_states`` keeps)."""
    pool = g.tags.get(POOL_TAG) or pool_of(g.tags, g.zones) or g.name
    return GroupState(g.name, _master(g), g.zones[0], pool, g.desired, g.min_size, g.max_size)


def _master(g: Group) -> bool:
    """Whether ``g`` is a control-plane group by kOps' role tags (``core.kops.MASTER_ROLE_TAGS``)."""
    return not g.tags.keys().isdisjoint(MASTER_ROLE_TAGS)
