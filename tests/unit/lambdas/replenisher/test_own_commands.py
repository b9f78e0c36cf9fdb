"""When the replenisher's tick reads its own commands (``lambdas.replenisher.own_commands``): only when ``decide`` can
look at one; any other event always."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamo import ledger as ledger_store
from core.kops import ManagedGroup, Role
from core.ledger import Backoff, Compensation, Ledger
from core.model import utcnow
from lambdas.replenisher.gather import gather
from lambdas.replenisher.handler import Deps
from lambdas.replenisher.own_commands import needed_by_groups, needed_by_ledgers
from lambdas.replenisher.world import Group, Instance
from tests.dynamo_reads import answered_sort_keys
from tests.unit.lambdas.replenisher.conftest import CLUSTER
from tests.unit.lambdas.replenisher.own_drain import own


def group(role: Role, *states: str) -> Group:
    info = ManagedGroup(name=f"{role.value}-a", cluster=CLUSTER, role=role, instance_group=None, pool=None)
    instances = tuple(Instance(f"i-{n:017x}", "us-east-1a", state) for n, state in enumerate(states))
    return Group(info=info, desired=len(states), min_size=0, max_size=len(states), instances=instances)


def test_a_surplus_master_is_the_only_group_that_needs_them() -> None:
    assert needed_by_groups([group(Role.CONTROL_PLANE, "InService", "Pending")])
    assert not needed_by_groups([group(Role.CONTROL_PLANE, "InService", "Terminating", "Detached")])
    assert not needed_by_groups([group(Role.NODE, "InService", "InService", "InService")])
    assert not needed_by_groups([])


def test_a_compensation_or_a_backoff_needs_them() -> None:
    now = utcnow()
    failed = Backoff(last_failure_at=now - timedelta(seconds=30), window_seconds=60)
    assert needed_by_ledgers([Ledger(asg_name="a", compensation=Compensation(pool="p", started_at=now))], now)
    assert needed_by_ledgers([Ledger(asg_name="a", backoff=failed)], now)
    assert not needed_by_ledgers([Ledger(asg_name="a", backoff=failed)], now + timedelta(seconds=31))
    assert not needed_by_ledgers([Ledger(asg_name="a")], now)


@pytest.mark.parametrize("ledger", [None, "compensation", "backoff"])
def test_a_tick_reads_its_commands_only_when_a_ledger_needs_them(
    deps: Deps, monkeypatch: pytest.MonkeyPatch, ledger: str | None
) -> None:
    now = utcnow()
    own(deps, "giveback-1")
    own(deps, "surplus-2")
    if ledger == "compensation":
        led = Ledger(asg_name="nodes-a", compensation=Compensation(pool="nodes", started_at=now))
        ledger_store.write(deps.store, led, None, now)
    elif ledger == "backoff":
        led = Ledger(asg_name="nodes-a", backoff=Backoff(last_failure_at=now, window_seconds=300))
        ledger_store.write(deps.store, led, None, now)
    answered = answered_sort_keys(monkeypatch, deps.store.table)

    ticked = gather(deps, now, tick=True)

    expected = [] if ledger is None else ["giveback-1", "surplus-2"]
    assert sorted(ticked.commands) == expected
    assert sorted(sk for sk in answered if sk.startswith("CMD#")) == ["CMD#" + c for c in expected]
    assert sorted(gather(deps, now).commands) == ["giveback-1", "surplus-2"]  # any other event: always


def test_a_tick_reads_them_after_the_groups_for_a_surplus_master(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    now = utcnow()
    own(deps, "surplus-2")
    client = deps.aws.autoscaling.client  # type: ignore[attr-defined]
    master = next(g for g in gather(deps, now).groups.values() if g.role is Role.CONTROL_PLANE)
    client.update_auto_scaling_group(AutoScalingGroupName=master.name, MaxSize=2, DesiredCapacity=2)
    calls: list[str] = []
    real_query, real_groups = deps.store.table.query, deps.aws.autoscaling.cluster_groups

    def query(**kwargs: Any) -> Any:
        calls.append("query")
        return real_query(**kwargs)

    def groups(cluster: str) -> Any:
        calls.append("groups")
        return real_groups(cluster)

    monkeypatch.setattr(deps.store.table, "query", query)
    monkeypatch.setattr(deps.aws.autoscaling, "cluster_groups", groups)

    ticked = gather(deps, now, tick=True)

    assert sorted(ticked.commands) == ["surplus-2"]
    assert calls[calls.index("groups") + 1 :] == ["query", "query"]  # the two prefixes, after the groups
