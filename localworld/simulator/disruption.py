"""The disruption controller: keeps PodDisruptionBudget status (policy/v1beta1) current.

``currentHealthy``, ``desiredHealthy``, ``disruptionsAllowed``, ``expectedPods``, ``observedGeneration``, and prunes
``disruptedPods`` (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/). Without ``observedGeneration`` the
Eviction API refuses every eviction. Updates use the PDB's resourceVersion (optimistic concurrency), as the real
controller does, so a stale status never overwrites an eviction's decrement.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from localworld.rest import JSON, q
from localworld.simulator.base import Action, Controller, View
from localworld.simulator.objects import PATHS, controller_of, is_terminating, parse_time, pod_ready, selector_matches

DISRUPTED_POD_TIMEOUT = 120.0  # seconds; the disruption controller's DeletionTimeout


def scaled_value(value: int | str, total: int, round_up: bool) -> int:
    """An IntOrString (``3`` or ``"50%"``) relative to ``total`` (``intstr.GetScaledValueFromIntOrPercent``)."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        raw = pct * total / 100
        return math.ceil(raw) if round_up else math.floor(raw)
    return int(text)


def expected_scale(
    matched: list[JSON],
    rsets: Mapping[str, JSON],
    dsets: Mapping[str, JSON],
    deploys: Mapping[str, JSON],
) -> int | None:
    """Sum of the matched pods' controllers' desired replicas; None when a pod has no controller."""
    by_uid = {o["metadata"]["uid"]: (kind, o) for kind, group in (("rs", rsets), ("ds", dsets)) for o in group.values()}
    deploy_by_uid = {d["metadata"]["uid"]: d for d in deploys.values()}
    scales: dict[str, int] = {}
    ds_counts: dict[str, int] = {}
    for pod in matched:
        ref = controller_of(pod)
        if ref is None:
            return None
        kind_obj = by_uid.get(ref["uid"])
        if kind_obj is None:
            scales.setdefault(ref["uid"], 0)
            continue
        kind, owner = kind_obj
        if kind == "ds":
            ds_counts[ref["uid"]] = ds_counts.get(ref["uid"], 0) + 1
            continue
        parent = controller_of(owner)
        if parent and parent.get("kind") == "Deployment" and parent["uid"] in deploy_by_uid:
            deploy = deploy_by_uid[parent["uid"]]
            scales[parent["uid"]] = int((deploy.get("spec") or {}).get("replicas", 1))
        else:
            scales[ref["uid"]] = int((owner.get("spec") or {}).get("replicas", 1))
    return sum(scales.values()) + sum(ds_counts.values())


def pdb_status(
    pdb: Mapping[str, Any],
    pods: Mapping[str, JSON],
    rsets: Mapping[str, JSON],
    dsets: Mapping[str, JSON],
    deploys: Mapping[str, JSON],
    now: float | None = None,
) -> JSON:
    """The status the disruption controller would write for ``pdb`` (pure: caches in, status out)."""
    now = time.time() if now is None else now
    meta, spec = pdb["metadata"], pdb.get("spec") or {}
    old = pdb.get("status") or {}
    ns = meta["namespace"]
    matched = [
        p
        for p in pods.values()
        if p["metadata"]["namespace"] == ns
        and selector_matches(spec.get("selector"), p["metadata"].get("labels") or {}, empty_matches=False)
    ]
    names = {p["metadata"]["name"]: p for p in matched}
    disrupted: dict[str, str] = {}
    for name, stamp in (old.get("disruptedPods") or {}).items():
        pod = names.get(name)
        if pod is None or is_terminating(pod):
            continue
        at = parse_time(stamp)
        if at is not None and at + DISRUPTED_POD_TIMEOUT < now:
            continue
        disrupted[name] = stamp
    healthy = sum(
        1 for p in matched if pod_ready(p) and not is_terminating(p) and p["metadata"]["name"] not in disrupted
    )
    fail_safe = False
    if spec.get("maxUnavailable") is not None:
        expected = expected_scale(matched, rsets, dsets, deploys)
        if expected is None:
            fail_safe, expected = True, len(matched)
        unavailable = scaled_value(spec["maxUnavailable"], expected, round_up=True)
        desired = max(0, expected - unavailable)
    elif isinstance(spec.get("minAvailable"), str) and str(spec["minAvailable"]).endswith("%"):
        expected = expected_scale(matched, rsets, dsets, deploys)
        if expected is None:
            fail_safe, expected = True, len(matched)
        desired = scaled_value(spec["minAvailable"], expected, round_up=True)
    else:
        expected = len(matched)
        desired = int(spec.get("minAvailable", 1) if spec.get("minAvailable") is not None else 1)
    allowed = 0 if fail_safe or expected <= 0 else max(0, healthy - desired)
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "observedGeneration": int(meta.get("generation", 1)),
        "disruptedPods": disrupted or None,
    }


class DisruptionController(Controller):
    """Plans PDB status updates where the computed status differs from the stored one."""

    def plan(self, view: View, actions: list[Action]) -> None:
        now = time.time()
        for key, pdb in view.pdbs.items():
            status = pdb_status(pdb, view.pods, view.rsets, view.dsets, view.deploys, now)
            old = pdb.get("status") or {}
            comparable = {k: old.get(k) or None for k in status}
            wanted = {k: v or None for k, v in status.items()}
            if comparable == wanted:
                continue
            rv = pdb["metadata"].get("resourceVersion", "")
            if self.recent.check("pdb", f"{key}@{rv}", hold=1.0):
                continue
            actions.append((f"update PDB {key} status", lambda pdb=pdb, status=status: self._write_pdb(pdb, status)))

    def _write_pdb(self, pdb: JSON, status: JSON) -> None:
        meta = pdb["metadata"]
        body = {**pdb, "status": {k: v for k, v in status.items() if v is not None}}
        body["status"].setdefault("disruptedPods", None)
        prefix = PATHS["pdbs"].rsplit("/", 1)[0]  # /apis/policy/v1beta1
        path = f"{prefix}/namespaces/{q(meta['namespace'])}/poddisruptionbudgets/{q(meta['name'])}/status"
        try:
            updated = self.rest.put(path, body)
        except ApiException as err:
            if err.status == 409:  # an eviction changed it first; the next pass recomputes
                return
            raise
        self.informers["pdbs"].apply(updated)
