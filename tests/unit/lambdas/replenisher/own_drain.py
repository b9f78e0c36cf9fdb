"""One of the replenisher's own drains recorded in the table as it records them, then changed (``own``): the
command items its gather and sweep tests read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.model import Command, utcnow
from lambdas.replenisher.handler import Deps
from tests.unit.lambdas.replenisher.conftest import CLUSTER


def own(deps: Deps, command_id: str, status: str = "queued", **changed: Any) -> dict[str, Any]:
    """Record one of the replenisher's own drains as it does, then with ``status`` and ``changed`` attributes."""
    now = utcnow()
    drain = Command(
        command_id=command_id,
        cluster=CLUSTER,
        kind="drain",
        instance_id="i-0123456789abcdef0",
        deadline=now + timedelta(minutes=10),
    )
    deps.store.record_command(drain, ttl_seconds=3600, now=now)
    item = deps.store.get_command(command_id)
    assert item is not None
    deps.store.put(f"CMD#{command_id}", {**item, "status": status, **changed})
    return {**item, "status": status, **changed}
