"""Scenario: an AZ stops launching Spot capacity; its siblings cover the shortfall; it recovers; the borrowed
instances are drained through the agent and removed.

What runs for real: the replenisher Lambda's handler (in this process, against moto, driven by the local world's
event pump ``localworld.eventbus``: Auto Scaling launch events, the periodic tick, and the agent's "Node Drain ..."
events from the EventBridge rule's observer queue), the agent (``python -m agent``, its own process: membership and
drains), moto's Auto Scaling with the capacity-outage fault (``localworld.faults``), and kube-apiserver + etcd.

The hold period and the backoff are shortened (``RECOVERY_HOLD_SECONDS=20``, ``BACKOFF_INITIAL_SECONDS=10``) so the
scenario takes about a minute instead of a quarter of an hour; everything else is the Lambda's defaults.

The verdict checks invariants 2 (masters never compensated), 3 (no instance terminated before its node was
drained), 4 (every increase recorded before it is made and undone exactly once: desired and MaxSize end where they
were, no borrowed instance left) and 5 (PodDisruptionBudgets honoured, DaemonSet pods stay).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Metrics

from adapters.dynamo import ledger as ledger_store
from adapters.dynamo.store import Store
from core.model import parse_provider_id
from core.settings import AgentSettings, ReplenisherSettings
from lambdas.replenisher.handler import Deps, handle
from localworld.eventbus import LAUNCH_SUCCESSFUL, LAUNCH_UNSUCCESSFUL, EventBus
from localworld.faults import CapacityOutage
from localworld.workloads import deploy_workloads, wait_pods_ready
from localworld.world import LocalWorld
from scenarios.observe import PdbGuard, wait_until
from scenarios.settings import settings_env, user_settings
from scenarios.timeline import Timeline

NAMESPACE = "workloads"
FAILED_AZ = "us-east-1a"
LOST = 2  # instances of AZ a reclaimed while it cannot launch
SCENARIO_SETTINGS = {"RECOVERY_HOLD_SECONDS": "20", "BACKOFF_INITIAL_SECONDS": "10", "BACKOFF_MAX_SECONDS": "60"}
TICK_SECONDS = 2.0
RETRY_SECONDS = 3.0  # how often the failing ASG retries (Auto Scaling: every few seconds)


def _sizes(autoscaling: Any, names: list[str]) -> dict[str, tuple[int, int, tuple[str, ...]]]:
    out = {}
    for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate(AutoScalingGroupNames=names):
        for g in page["AutoScalingGroups"]:
            out[g["AutoScalingGroupName"]] = (
                g["DesiredCapacity"],
                g["MaxSize"],
                tuple(sorted(i["InstanceId"] for i in g["Instances"])),
            )
    return out


def _ready_workers(world: LocalWorld, excluding: Collection[str] = ()) -> int:
    """Worker nodes whose Ready condition is True, not counting the nodes of the instances ``excluding`` names (a
    reclaimed instance's node stays Ready for a moment after its instance is gone)."""
    return sum(
        1
        for n in world.running_simulator().nodes()
        if "node-role.kubernetes.io/node" in n["metadata"].get("labels", {})
        and any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
        and (parse_provider_id(n.get("spec", {}).get("providerID")) or ("", ""))[1] not in excluding
    )


class Driver:
    """The replenisher wired to the event pump; every response's actions land on the timeline."""

    def __init__(self, world: LocalWorld, timeline: Timeline, deps: Deps, bus: EventBus, log: Any) -> None:
        self.world, self.timeline, self.deps, self.bus, self.log = world, timeline, deps, bus, log
        self.responses: list[tuple[float, str, dict[str, Any]]] = []
        self.terminated_at: dict[str, float] = {}

    def handler(self, event: dict[str, Any]) -> dict[str, Any]:
        with contextlib.redirect_stdout(self.log):
            response = handle(event, self.deps)
        at = time.monotonic()
        self.responses.append((at, event["detail-type"], response))
        for action in response.get("actions", []):
            text, result = action["action"], action["result"]
            if text.startswith("nothing_to_do") or text.endswith(
                (": compensation state", ": raised", ": give-back progress recorded")
            ):
                continue  # routine bookkeeping; the timeline keeps the steps that matter
            if (
                text.startswith("write ledger")
                and "launch failure" in text
                and any("launch failure" in e.what for e in self.timeline.entries[-30:])
            ):
                continue
            self.timeline.mark("lambda", f"[{event['detail-type']}] {text}: {result}")
            if text.startswith("terminate ") and result == "terminated":
                self.terminated_at[text.split()[1]] = at
        return response

    def launched(self, event: dict[str, Any]) -> None:
        detail = event["detail"]
        self.timeline.mark(
            "asg", f"EC2 Instance Launch Successful: {detail['EC2InstanceId']} in {detail['AutoScalingGroupName']}"
        )

    def subscribe(self) -> None:
        self.bus.subscribe("aws.autoscaling", LAUNCH_SUCCESSFUL, self.launched)
        for source, detail_type in (
            ("aws.autoscaling", LAUNCH_UNSUCCESSFUL),
            ("aws.autoscaling", LAUNCH_SUCCESSFUL),
            ("aws.events", "Scheduled Event"),
            ("node-manager.agent", "Node Drain Succeeded"),
            ("node-manager.agent", "Node Drain Failed"),
            ("node-manager.agent", "Node Drain Skipped"),
        ):
            self.bus.subscribe(source, detail_type, self.handler)


def run(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
    """Play the scenario on a started world; the checks land in ``timeline``."""
    info = world.setup_cluster()
    autoscaling = world.client("autoscaling")
    workers = list(info.worker_asgs.values())
    masters = list(info.master_asgs.values())
    failed = info.worker_asgs[FAILED_AZ]
    donors = [n for n in workers if n != failed]
    timeline.mark(
        "world",
        f"kOps cluster {info.name}: {len(masters)} master ASGs, {len(workers)} Spot worker "
        f"ASGs, {len(world.running_simulator().nodes())} nodes Ready",
    )
    workloads = deploy_workloads(world.api, NAMESPACE)
    wait_pods_ready(
        world.api, NAMESPACE, workloads.controlled_pods + len(world.running_simulator().nodes()) + 1, timeout=30
    )
    timeline.mark("world", "workloads running: Deployments with PDBs, a DaemonSet, an emptyDir pod, a bare pod")
    agent = world.spawn("agent", user_settings(AgentSettings), log_dir / "agent.log")
    store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
    node_count = len(world.running_simulator().nodes())
    wait_until(lambda: len(store.list_nodes(max_age_seconds=600)) >= node_count, 60, "the agent's membership")
    timeline.mark("agent", f"membership reported: {node_count} nodes (pid {agent.pid})")
    before = _sizes(autoscaling, workers + masters)
    ready_before = _ready_workers(world)

    settings = ReplenisherSettings.from_env(settings_env(ReplenisherSettings, info.env(), SCENARIO_SETTINGS))
    deps = Deps.from_clients(
        settings,
        dynamodb=world.resource("dynamodb"),
        autoscaling=autoscaling,
        ec2=world.client("ec2"),
        sqs=world.client("sqs"),
        metrics=Metrics(namespace="NodeManager", service="replenisher"),
    )
    bus = EventBus(world.session, observer_queue_url=info.observer_queue_url)
    bus.baseline()
    outage = CapacityOutage(bus)
    pdb_guard = PdbGuard(world.api, NAMESPACE)
    pdb_guard.start()
    lambda_log = (log_dir / "replenisher.log").open("a")
    driver = Driver(world, timeline, deps, bus, lambda_log)
    driver.subscribe()
    timeline.mark(
        "world",
        f"replenisher wired to the event pump (hold {settings.recovery_hold_seconds} s, "
        f"backoff from {settings.backoff_initial_seconds} s: shortened for the demo)",
    )

    last_tick = last_retry = 0.0

    def step() -> None:
        nonlocal last_tick, last_retry
        now = time.monotonic()
        if outage.failing and now - last_retry >= RETRY_SECONDS:
            outage.retry()
            last_retry = now
        if now - last_tick >= TICK_SECONDS:
            bus.tick("replenisher-tick")
            last_tick = now
        bus.pump()

    def run_until(predicate: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            step()
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.2)

    try:
        # 1. AZ a runs out of Spot capacity, and Spot reclaims two of its instances.
        outage.fail(failed)
        timeline.mark("aws", f"{FAILED_AZ}: no Spot capacity from now on ({failed} cannot launch)")
        lost = list(before[failed][2][:LOST])
        world.client("ec2").terminate_instances(InstanceIds=lost)
        timeline.mark("aws", f"Spot reclaims {', '.join(lost)} in {FAILED_AZ}; the group retries and fails")
        covered = run_until(
            lambda: (
                _ready_workers(world, excluding=lost) >= ready_before
                and _sizes(autoscaling, donors) != {n: before[n] for n in donors}
            ),
            60,
            "the shortfall to be covered by the siblings",
        )
        assert covered
        ready_again = _ready_workers(world, excluding=lost)
        timeline.mark(
            "kubernetes", f"{ready_again} worker nodes Ready again, the reclaimed not counted (was {ready_before})"
        )
        end = time.monotonic() + 6  # a few more retries: duplicates of the failure
        run_until(lambda: time.monotonic() > end, 10, "duplicate failures")
        failures = len(outage.events)
        timeline.mark("aws", f"{failures} 'EC2 Instance Launch Unsuccessful' events so far")
        during = _sizes(autoscaling, workers)
        ledger_item = store.get(f"COMP#{failed}")
        compensation = ledger_store.from_item(ledger_item).compensation if ledger_item else None
        borrowed = {i for d in compensation.donors.values() for i in d.instance_ids} if compensation else set()

        # 2. AZ a recovers; the borrowed instances go back once it held its nodes for the hold period.
        new = outage.recover(failed)
        timeline.mark("aws", f"{FAILED_AZ} has capacity again: {failed} launches {', '.join(new)}")
        run_until(
            lambda: (
                store.get(f"COMP#{failed}") is not None
                and (store.get(f"COMP#{failed}") or {}).get("compensation") is None
            ),
            150,
            "the borrowed capacity to be given back",
        )
        timeline.mark("lambda", f"compensation of {failed} given back: ledger cleared")
        time.sleep(0.5)
    finally:
        pdb_guard.stop()
        lambda_log.close()
        outage.clear()

    after = _sizes(autoscaling, workers + masters)
    commands: dict[str, list[dict[str, Any]]] = {}  # instance -> its give-back drains (a reissue adds ``-<n>``)
    for item in store.query_prefix("CMD#giveback-"):
        commands.setdefault(item["instance_id"], []).append(item)
    check = timeline.check
    raises = [r for _, _, r in driver.responses if r.get("operation") == "replenish"]
    check(
        "the shortfall was covered once despite the repeated failure events",
        len(raises) == 1 and sum(during[n][0] - before[n][0] for n in donors) == LOST,
        f"{failures} failure events, {len(raises)} raise, donors desired "
        + ", ".join(f"{before[n][0]}->{during[n][0]}" for n in donors),
    )
    check(
        "invariant 2: masters never compensated (their groups untouched)",
        all(after[m][:2] == before[m][:2] for m in masters)
        and not any(store.get(f"COMP#{m}") and (store.get(f"COMP#{m}") or {}).get("compensation") for m in masters),
        "master groups' desired and MaxSize unchanged",
    )
    drained_first = all(
        any(
            c.get("status") == "succeeded"
            and timeline.mono(datetime.fromisoformat(c["finished_at"])) <= driver.terminated_at.get(i, 0)
            for c in commands.get(i, [])
        )
        for i in borrowed
    )
    check(
        "invariant 3: every borrowed instance drained (by the agent) before it was terminated",
        bool(borrowed) and drained_first and set(driver.terminated_at) == borrowed,
        f"borrowed {sorted(borrowed)}, terminated {sorted(driver.terminated_at)}",
    )
    remaining = {i for n in workers for i in after[n][2]}
    recorded_first = all(
        any(
            a["action"].startswith("write ledger") and "intent" in a["action"]
            for a in r["actions"][: next(k for k, a in enumerate(r["actions"]) if a["action"].startswith("set "))]
        )
        for r in raises
    )
    check(
        "invariant 4: increase recorded before made, undone exactly once; sizes end where they were",
        recorded_first and all(after[n][:2] == before[n][:2] for n in workers) and not (borrowed & remaining),
        ", ".join(f"{n.split('.')[0]} {before[n][:2]}->{after[n][:2]}" for n in workers),
    )
    check(
        "invariant 5: PodDisruptionBudgets honoured, DaemonSet pods stayed",
        not pdb_guard.violations
        and pdb_guard.samples > 0
        and all(
            any(
                p.get("action") == "skip" and "daemonset" in (p.get("reason") or "")
                for c in commands.get(i, [])
                if c.get("status") == "succeeded"
                for p in (c.get("result") or {}).get("pods", [])
            )
            for i in borrowed
            if i in commands
        ),
        f"{pdb_guard.samples} PDB samples, violations {pdb_guard.violations[:3]}",
    )
    check(
        "no capacity lost at the end",
        _ready_workers(world) >= ready_before,
        f"{_ready_workers(world)} worker nodes Ready (was {ready_before})",
    )
    check("the agent is still running", agent.alive(), f"pid {agent.pid}")
    timeline.mark("world", f"done at {datetime.now(UTC):%H:%M:%S}")
