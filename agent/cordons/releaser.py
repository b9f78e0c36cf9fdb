"""The leader's loop that gives back cordons after their quiet period (``agent.cordons``).

Every ``CORDON_CHECK_SECONDS`` it reads the rebalance commands (``CMD#rebalance-``: the only ones with a quiet
period, ``core.model.QUIET_CORDON_PREFIX``; a quiet period on any other command is refused by ``Command``, so none
elsewhere is judged); when one is pending, the commands of its instance (a later command keeps its cordon): through
the instance's pointers (``adapters.dynamo.command_index``) once the index is complete and a few instances are
pending, else from one Query of the cluster's ``CMD#`` range. It judges each pending one (``decisions.judge``) and:

A command its worker left ``running`` past its deadline (``decisions.abandoned``: nothing else would ever end it) is
first ended ``timed_out`` (``end_abandoned_command``, conditional: a worker that took it over or beat since wins) and
judged at the next check (an end the table refuses is an error of that item alone, tried again at the next check).

- WAIT: nothing (the next check looks again; the state is the item, so a restart changes nothing);
- KEEP: records the reason as the item's ``resolution`` (never looked at again);
- RELEASE: claims the item (``resolution = releasing``, conditional: a Lambda that resolved it first wins), reads
  the instance's commands and ``HOOK#`` again and judges again (a Spot warning recorded since the scan keeps the
  cordon), then undoes the cordon at the node only while our annotation still names this command
  (``DrainEngine.release_node``: an operator's cordon, or one a later command took over, is left; a conflicting
  write re-reads the node), and records the outcome as the resolution.

Errors (the table, the Kubernetes API, an item of a shape nothing here can read) are logged and counted per item; the
item stays pending (or claimed) and is judged again at the next check, the others are judged as usual. ``check_once``
never raises. An item whose ``command`` or quiet period is unreadable is no give-back command (``decisions``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from adapters.dynamo.command_index import index_complete, indexed_commands
from adapters.dynamo.commands import PREFIX, commands_for_instance, end_abandoned_command, resolve_cordon
from adapters.dynamo.hooks import get_hook
from adapters.dynamo.store import Store
from adapters.dynamo.table import plain
from agent.cordons.decisions import RELEASED, RELEASING, Verdict, abandoned, command_id, judge, pending
from agent.drain.cordon import UncordonDecision
from agent.kube.views import NodeView
from agent.metrics import AgentMetrics
from core.exceptions import NodeNotFoundError
from core.model import QUIET_CORDON_PREFIX, utcnow

log = logging.getLogger(__name__)

# pending instances whose commands are read through their pointers (a Query and a GetItem a command each); with more
# pending (a wave of rebalance recommendations) one Query of the whole ``CMD#`` range costs fewer calls
INDEXED_INSTANCES_MAX = 20
METRIC_OUTCOME = {"released": "released", "kept": "kept", "errors": "error"}


class NodeReleaser(Protocol):
    """What the releaser needs of ``agent.drain.engine.DrainEngine``."""

    def find_node(self, instance_id: str, node_name: str | None = None) -> NodeView:
        """The node of ``instance_id``. Raises ``NodeNotFoundError``."""
        ...

    def release_node(self, node: NodeView, command_id: str) -> tuple[NodeView, UncordonDecision]:
        """Undo the cordon ``command_id`` made, if it still holds it."""
        ...


class CordonReleaser:
    """Gives back give-back cordons (see the module docstring).

    Args:
        store: the cluster's table partition.
        engine: finds nodes and undoes cordons (``DrainEngine``).
        period_seconds: seconds between checks (``CORDON_CHECK_SECONDS``).
        clock: the current UTC time.
        metrics: counts outcomes (``cordons_resolved``), optional.
    """

    def __init__(
        self,
        store: Store,
        engine: NodeReleaser,
        period_seconds: float,
        clock: Callable[[], datetime] = utcnow,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.period_seconds = period_seconds
        self.clock = clock
        self.metrics = metrics

    def run(self, stop: threading.Event) -> None:
        """Check now, then every ``period_seconds``, until ``stop`` is set. Never raises."""
        while not stop.is_set():
            try:
                self.check_once()
            except Exception:  # check_once never raises; the loop outlives a defect in it all the same
                log.exception("cordon check failed")
            if stop.wait(self.period_seconds):
                return

    def check_once(self) -> dict[str, int]:
        """One pass over the pending commands; returns how many were released, kept, waited for, or failed."""
        counts = {"released": 0, "kept": 0, "waiting": 0, "errors": 0}
        try:
            # only rebalance commands carry a quiet period (``core.model.QUIET_CORDON_PREFIX``): with none of them
            # pending, the check is that one range read, not a week of every command
            quiet = list(self.store.query_prefix(PREFIX + QUIET_CORDON_PREFIX, consistent=True, convert=False))
            self._end_abandoned(quiet, counts)
            waiting = [item for item in quiet if pending(item)]
            if not waiting:
                return counts
            others = self._commands_of(waiting)
        except Exception:
            log.exception("cordon check: could not read the commands")
            counts["errors"] += 1
            return counts
        for item in waiting:
            instance = _instance(item)
            try:
                if instance:
                    outcome = self._settle(plain(item), instance, others[instance])
                else:
                    log.warning("cordon check: a pending command names no instance command_id=%s", command_id(item))
                    outcome = "errors"
            except Exception:
                log.exception("cordon check failed command_id=%s", command_id(item))
                outcome = "errors"
            counts[outcome] += 1
            if self.metrics is not None and outcome != "waiting":
                self.metrics.cordons_resolved.labels(outcome=METRIC_OUTCOME[outcome]).inc()
        return counts

    def _end_abandoned(self, items: list[dict[str, Any]], counts: dict[str, int]) -> None:
        """End each of ``items`` (table values) its worker abandoned (``decisions.abandoned``), counting each ended as
        ``waiting`` in ``counts`` (judged at the next check). A write the table refuses (throttled, or for good: an
        item of a shape it cannot take) is logged and counted in ``errors`` for that item alone and tried again at
        the next check; the other items are judged as usual. Never raises."""
        for item in items:
            try:
                when = abandoned(item, self.clock())
                if when is None:
                    continue
                why = f"abandoned: its worker {item.get('worker')} stopped before it ended and its deadline passed"
                if not end_abandoned_command(self.store, command_id(item), item, when, why, now=self.clock()):
                    continue
            except Exception:
                log.exception("cordon check: could not end an abandoned command command_id=%s", command_id(item))
                counts["errors"] += 1
                if self.metrics is not None:
                    self.metrics.cordons_resolved.labels(outcome=METRIC_OUTCOME["errors"]).inc()
                continue
            counts["waiting"] += 1
            log.warning("give-back command ended for its stopped worker command_id=%s %s", command_id(item), why)

    def _commands_of(self, waiting: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """The ``CMD#`` items (plain values) of each instance a pending command names: through the instance's
        pointers (``adapters.dynamo.command_index``: a Query and a GetItem a command) once the index is complete and
        at most ``INDEXED_INSTANCES_MAX`` instances are pending, else from one Query of the cluster's ``CMD#`` range
        (a week of commands: about 4 MB at 1,000 nodes). Raises what the table raises."""
        instances = sorted({_instance(item) for item in waiting} - {""})
        if len(instances) <= INDEXED_INSTANCES_MAX and index_complete(self.store, self.clock()):
            return {instance: indexed_commands(self.store, instance) for instance in instances}
        found: dict[str, list[dict[str, Any]]] = {instance: [] for instance in instances}
        for item in self.store.query_prefix(PREFIX, consistent=True, convert=False):
            listed = found.get(_instance(item))
            if listed is not None:  # only the pending instances' commands are converted
                listed.append(plain(item))
        return found

    def _settle(self, item: Mapping[str, Any], instance: str, others: list[dict[str, Any]]) -> str:
        own = command_id(item)
        judgement = judge(item, others, None, self.clock())
        if judgement.verdict is Verdict.RELEASE:  # the HOOK# item is read only for a cordon otherwise due
            judgement = judge(item, others, get_hook(self.store, instance), self.clock())
        if judgement.verdict is Verdict.WAIT:
            return "waiting"
        if judgement.verdict is Verdict.KEEP:
            return self._keep(own, judgement.why)
        if not resolve_cordon(self.store, own, RELEASING, now=self.clock(), over=RELEASING):
            log.info("cordon resolved elsewhere meanwhile command_id=%s", own)
            return "kept"
        # a command recorded since the scan (a Spot warning) keeps the cordon: judge again on fresh reads
        fresh = self.store.get_command(own) or item
        again = judge(fresh, commands_for_instance(self.store, instance), get_hook(self.store, instance), self.clock())
        if again.verdict is not Verdict.RELEASE:
            return self._keep(own, again.why)
        node_name = (fresh.get("result") or {}).get("node_name") or (fresh.get("command") or {}).get("node_name")
        try:
            node = self.engine.find_node(instance, node_name)
        except NodeNotFoundError:
            return self._keep(own, "the node is gone")
        _, decision = self.engine.release_node(node, own)
        resolution = RELEASED if decision.patch is not None else decision.message
        resolve_cordon(self.store, own, resolution, now=self.clock(), over=RELEASING)
        log.info(
            "cordon given back after its quiet period command_id=%s instance_id=%s node=%s outcome=%r (%s)",
            own,
            instance,
            node.name,
            resolution,
            again.why,
        )
        return "released" if decision.patch is not None else "kept"

    def _keep(self, own: str, why: str) -> str:
        resolve_cordon(self.store, own, why, now=self.clock(), over=RELEASING)
        log.info("cordon kept, not given back command_id=%s why=%r", own, why)
        return "kept"


def _instance(item: Mapping[str, Any]) -> str:
    """The ``instance_id`` of a ``CMD#`` item, "" when it is not a string."""
    value = item.get("instance_id")
    return value if isinstance(value, str) else ""
