"""The replenisher's own ``CMD#`` items (``giveback-``/``surplus-``, ``decide.builder.OWN_COMMAND_PREFIXES``), read by
``gather`` only when ``decide`` can look at one (``needed_by_ledgers``, ``needed_by_groups``).

``decide`` reads a command of its own in two places only (``decide.builder.drain_done`` and ``send_if_needed``): a
compensation's give-back (``decide.give_back``, reached from ``decide.compensate.reconcile_group`` for a ledger that
carries a compensation, or that starts one because its group is in backoff with a shortfall) and the cleanup of a
surplus master (``decide.cleanup``: a control-plane group with more than ``ETCD_MEMBERS_PER_GROUP`` active
instances). A tick whose ledgers carry no compensation and are in no backoff, and whose control-plane groups have one
active instance each, reads none: without these two Queries (of the agent partition, one a prefix), which every
steady tick made and never looked at. Any other event reads them as before (a launch failure puts its group in
backoff inside ``decide``, ``record_launch_failure``), right after the cluster partition; so does a tick whose
ledgers need them. A tick that needs them only for a surplus master reads them after the groups (they say so): no
rule orders a command's status against the groups (the lock's item is still read before them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from adapters.dynamo.commands import PREFIX as COMMAND_PREFIX
from adapters.dynamo.store import Store
from adapters.dynamo.table import plain
from core.clock import aware_time
from core.kops import Role
from core.ledger import Ledger
from core.model import Command
from lambdas.common.telemetry import Telemetry
from lambdas.replenisher.decide.builder import OWN_COMMAND_PREFIXES
from lambdas.replenisher.decide.cleanup import ETCD_MEMBERS_PER_GROUP
from lambdas.replenisher.world import Group


def needed_by_ledgers(ledgers: Iterable[Ledger], now: datetime) -> bool:
    """Whether a ledger may lead ``decide`` to a command of its own: one carries a compensation, or is in backoff
    (a group failing to launch: a compensation may start, and be given back, in the same decision). Pure."""
    return any(led.compensation is not None or led.backoff.in_backoff(now) for led in ledgers)


def needed_by_groups(groups: Iterable[Group]) -> bool:
    """Whether a surplus master may be cleaned up (a drain command of its own): a control-plane group with more than
    ``ETCD_MEMBERS_PER_GROUP`` active instances. Pure."""
    return any(
        group.role is Role.CONTROL_PLANE and sum(1 for i in group.instances if i.active) > ETCD_MEMBERS_PER_GROUP
        for group in groups
    )


@dataclass(frozen=True)
class OwnCommands:
    """What ``read_own_commands`` read.

    Attributes:
        items: command id -> ``CMD#`` item (plain values) that ``decide`` can read (``World.commands``).
        unreadable: the ids of the items left out (``World.unreadable_commands``): recorded, so no command is
            recorded under one of them again (the record refuses to overwrite), and a drain sent again is given an
            id past them (``decide.builder.reissued_id``).
    """

    items: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    unreadable: frozenset[str] = frozenset()


def read_own_commands(store: Store, telemetry: Telemetry, logger: Any) -> OwnCommands:
    """The replenisher's own commands: one consistent Query a prefix of ``OWN_COMMAND_PREFIXES``, as the table
    answered, an item converted only when kept; the items ``decide`` can read (``own_command_error``) by command id,
    and the ids of those it cannot (left out, logged and counted: ``Skipped`` ``unreadable_item``).

    Not the whole agent partition: its other ``CMD#`` items (a week of drains, refresh steps and their results, kept
    until their TTL) and ``HOOK#`` items are history to this reader (issue 12, BENCHMARKS.md).

    Raises:
        StoreUnavailableError: a read failed.
    """
    commands: dict[str, Mapping[str, Any]] = {}
    unreadable: set[str] = set()
    for prefix in OWN_COMMAND_PREFIXES:
        for stored in store.query_prefix(COMMAND_PREFIX + prefix, consistent=True, convert=False):
            sk = str(stored.get("sk", ""))
            if not sk[4:].startswith(OWN_COMMAND_PREFIXES):
                continue
            item = plain(stored)
            why = own_command_error(item)
            if why is None:
                commands[sk[4:]] = item
            else:  # as an unreadable RUN# or COMP# item: left out, noted and counted; its id kept
                unreadable.add(sk[4:])
                logger.warning(f"unreadable item {sk} ignored", extra={"error": why})
                telemetry.count_by("Skipped", "reason", "unreadable_item")
    return OwnCommands(commands, frozenset(unreadable))


def own_command_error(item: Mapping[str, Any]) -> str | None:
    """Why ``decide`` cannot read one of the replenisher's own ``CMD#`` items (plain values), None when it can: its
    ``command`` validates as a ``Command`` and its ``deadline`` as recorded is an ISO 8601 time with a zone (the
    cleanup reads it so), its ``created_at`` is one too (``decide.builder.send_if_needed``), its ``status`` a string.
    Pure. The agent partition is written by more than the replenisher: an item of another shape is left out, its id
    kept (``OwnCommands.unreadable``): its drain is never taken as finished and is sent again under a new id past it
    (the record refuses to overwrite the item, and the agent rejects a body its item does not back)."""
    stored = item.get("command")
    if not isinstance(stored, Mapping):
        return "no command map"
    try:
        Command.model_validate(stored)
    except ValidationError as err:
        return f"command does not validate: {err}"
    for name, value in (("command.deadline", stored.get("deadline")), ("created_at", item.get("created_at"))):
        if aware_time(value) is None:
            return f"{name} is no ISO 8601 time with a zone: {value!r}"
    if not isinstance(item.get("status"), str):
        return "status is not a string"
    return None
