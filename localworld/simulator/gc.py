"""The garbage collector: deletes pods and ReplicaSets whose controller owner (ReplicaSet, DaemonSet or Deployment) is
gone, once it has been missing from the caches for ``OWNER_GRACE`` seconds (so an owner created a moment ago and not yet
seen by its informer does not lose its dependents).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from localworld.rest import q
from localworld.simulator.base import Action, Controller, Shared, View
from localworld.simulator.objects import controller_of, is_terminating

OWNER_GRACE = 2.0  # seconds an owner may be missing from the cache before its dependents are collected
OWNER_KINDS = ("ReplicaSet", "DaemonSet", "Deployment")


class GarbageCollector(Controller):
    """Plans the deletion of orphaned pods (graceful) and ReplicaSets."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._owner_missing_since: dict[str, float] = {}  # owner uid -> monotonic time first found missing

    def plan(self, view: View, actions: list[Action]) -> None:
        now = time.monotonic()
        owners = {o["metadata"]["uid"] for group in (view.rsets, view.dsets, view.deploys) for o in group.values()}
        missing_now: set[str] = set()

        def orphaned(obj: Mapping[str, Any]) -> bool:
            ref = controller_of(obj)
            if not ref or ref.get("kind") not in OWNER_KINDS:
                return False
            if ref["uid"] in owners:
                return False
            missing_now.add(ref["uid"])
            since = self._owner_missing_since.setdefault(ref["uid"], now)
            return now - since >= OWNER_GRACE

        for key, pod in view.pods.items():
            if not is_terminating(pod) and orphaned(pod) and not self.recent.check("gc", pod["metadata"]["uid"]):
                actions.append((f"collect pod {key}", lambda pod=pod: self.pod_writer.delete(pod)))
        for key, rs in view.rsets.items():
            meta = rs["metadata"]
            if not meta.get("deletionTimestamp") and orphaned(rs) and not self.recent.check("gc", meta["uid"]):
                path = f"/apis/apps/v1/namespaces/{q(meta['namespace'])}/replicasets/{q(meta['name'])}"
                actions.append((f"collect replicaset {key}", lambda path=path: self.rest.delete_quiet(path)))
        for uid in list(self._owner_missing_since):
            if uid not in missing_now:
                del self._owner_missing_since[uid]
