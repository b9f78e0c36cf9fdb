"""Scenario: a rolling refresh of the whole local cluster, masters then workers, surge first.

What runs for real: the refresher's handler in this process (concurrent execution environments, invoked by the
event pump for the agent's drain results and Auto Scaling's launches, as the stack's rules would), the agent
(``python -m agent``), moto's Auto Scaling, kube-apiserver + etcd with the simulator. Workloads with
PodDisruptionBudgets run on the cluster throughout.

The verdict checks DESIGN.md's invariants 1-4: Ready workers never below the start; masters one at a time, only
while all are Ready, never surged; no instance terminated before its drain finished; every capacity increase
undone (desired and MaxSize back, no instance outside its group, lock released).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from datetime import datetime
from pathlib import Path

from core.runs import Run, RunStatus, StepState
from core.settings import AgentSettings, RefresherSettings
from localworld.workloads import deploy_workloads, wait_pods_ready
from localworld.world import LocalWorld
from scenarios.refreshing import RefreshHarness, ready_workers
from scenarios.settings import user_settings
from scenarios.timeline import Timeline

NAMESPACE = "workloads"
MASTER_LABEL = "node-role.kubernetes.io/master"


class Watcher(threading.Thread):
    """Samples the run, the groups and the nodes every ``interval`` s; marks changes on the timeline and keeps
    what the verdict needs."""

    def __init__(self, h: RefreshHarness, timeline: Timeline, interval: float = 0.1) -> None:
        super().__init__(name="refresh-watcher", daemon=True)
        self.h, self.timeline, self.interval = h, timeline, interval
        self.run_id: str | None = None  # the first run seen
        self.halt = threading.Event()
        self.states: dict[int, str] = {}
        self.status = ""
        self.start_ready = ready_workers(h.world)
        self.min_ready = self.start_ready
        self.master_desired_max: dict[str, int] = {}
        self.left_group_at: dict[str, float] = {}  # instance id -> when first seen out of its group
        self.master_cordon_ready: list[tuple[str, int]] = []  # master node first seen cordoned, Ready masters then
        self._cordoned: set[str] = set()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            try:
                self.sample()
            except Exception as err:  # noqa: BLE001 - a watcher outlives a failed read
                self.errors.append(f"{type(err).__name__}: {err}")

    def sample(self) -> None:
        h = self.h
        self.min_ready = min(self.min_ready, ready_workers(h.world))
        nodes = h.world.running_simulator().nodes()
        masters = [n for n in nodes if MASTER_LABEL in n["metadata"].get("labels", {})]
        ready_masters = sum(
            1
            for n in masters
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
        )
        for node in masters:
            name = node["metadata"]["name"]
            if node["spec"].get("unschedulable") and name not in self._cordoned:
                self._cordoned.add(name)
                self.master_cordon_ready.append((name, ready_masters))
        groups = h.groups()
        members = {i["InstanceId"] for g in groups.values() for i in g["Instances"]}
        for name in h.info.master_asgs.values():
            self.master_desired_max[name] = max(self.master_desired_max.get(name, 0), groups[name]["DesiredCapacity"])
        if self.run_id is None:
            latest = h.runs.list(1)
            if not latest:
                return
            self.run_id = latest[0].run_id
        run = h.run(self.run_id)
        for step in run.steps:
            if step.instance_id not in members and step.instance_id not in self.left_group_at:
                self.left_group_at[step.instance_id] = datetime.now().timestamp()
            if self.states.get(step.index) != step.state.value:
                self.states[step.index] = step.state.value
                extra = ""
                if step.state is StepState.DRAINING and step.surge_instance_id:
                    extra = f" (spare {step.surge_instance_id} Ready)"
                if step.state is StepState.SURGING:
                    extra = f" (desired of {step.group} raised)"
                self.timeline.mark(
                    "refresher",
                    f"step {step.index:>2} {step.group.split('.')[0]:<22} "
                    f"{step.instance_id}: {step.state.value}{extra}",
                )
        if run.status.value != self.status:
            self.status = run.status.value
            self.timeline.mark(
                "refresher", f"run {run.run_id}: {run.status.value}" + (f" ({run.reason})" if run.reason else "")
            )

    def stop(self) -> None:
        self.halt.set()
        self.join(5)


def _drained_before_terminated(h: RefreshHarness, run: Run, left: dict[str, float]) -> tuple[bool, str]:
    """Invariant 3: each replaced instance's drain command was terminal before it left its group."""
    bad = []
    for step in run.steps:
        if step.state is not StepState.DONE or not step.command_id:
            continue
        item = h.store.get_command(step.command_id) or {}
        finished = item.get("finished_at")
        gone = left.get(step.instance_id)
        ok_status = item.get("status") in ("succeeded", "skipped") or (
            item.get("status") == "timed_out" and run.options.drain_timeout_policy.value == "terminate"
        )
        if not finished or gone is None or not ok_status or datetime.fromisoformat(finished).timestamp() > gone:
            bad.append(f"{step.instance_id} ({item.get('status')})")
    return not bad, (
        f"{sum(1 for s in run.steps if s.state is StepState.DONE)} instances, each drained first"
        if not bad
        else "not drained first: " + ", ".join(bad)
    )


def run(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
    """Play the scenario on a started world; the checks land in ``timeline``."""
    info = world.setup_cluster()
    timeline.mark(
        "world",
        f"kOps cluster {info.name}: {len(info.master_asgs)} master ASGs, "
        f"{len(info.worker_asgs)} Spot worker ASGs, {len(world.running_simulator().nodes())} nodes Ready",
    )
    workloads = deploy_workloads(world.api, NAMESPACE)
    expected = workloads.controlled_pods + len(world.running_simulator().nodes()) + 1
    wait_pods_ready(world.api, NAMESPACE, expected, timeout=30)
    timeline.mark("world", "workloads running: Deployments with PDBs, a DaemonSet, an emptyDir pod, a bare pod")

    h = RefreshHarness(
        world,
        info,
        log_dir=log_dir,
        refresher_env=user_settings(RefresherSettings),
        agent_env=user_settings(AgentSettings),
    )
    out = sys.stdout
    lambda_log = (log_dir / "refresher.log").open("a")
    # the handler's JSON logs and metrics (every execution environment's) go to their own log
    with lambda_log, contextlib.redirect_stdout(lambda_log):
        try:
            h.start()
            timeline.mark(
                "agent",
                f"membership reported for {len(world.running_simulator().nodes())} nodes "
                f"(agent pid {h.agent.pid if h.agent else '?'})",
            )
            before = h.groups()
            old = {i["InstanceId"] for g in before.values() for i in g["Instances"]}
            plan = h.refresh(all=True, dry_run=True)
            timeline.mark("refresher", "dry run: plan returned, nothing changed")
            print(
                "\nPlan (dry run)\n" + "\n".join("  " + line for line in plan["table"].splitlines()),
                file=out,
                flush=True,
            )
            watcher = Watcher(h, timeline)
            watcher.start()
            started = h.refresh(all=True)
            if started["status"] != "started":
                raise RuntimeError(f"the refresh did not start: {started.get('reason') or started['status']}")
            run_id = started["run"]["run_id"]
            timeline.mark(
                "refresher",
                f"run {run_id} started: {len(started['steps'])} instances, masters first "
                f"(max surge 1, drain timeout policy pause)",
            )
            final = h.wait_run(run_id, 240)
            watcher.sample()
            watcher.stop()
            after = h.groups()
        finally:
            h.stop()

    events = h.bus.events()
    timeline.mark(
        "world",
        f"EventBridge (pump) delivered {len(events)} events: "
        f"{len(h.bus.events(source='node-manager.agent'))} agent results, "
        f"{len(h.bus.events(source='aws.autoscaling'))} launches; tick never pumped",
    )
    masters = [s for s in final.steps if s.role == "control-plane"]
    check = timeline.check
    check(
        "the run replaced every instance",
        final.status is RunStatus.SUCCEEDED
        and all(s.state is StepState.DONE for s in final.steps)
        and not (old & h.running_instances()),
        f"run {final.status.value}, {sum(s.state is StepState.DONE for s in final.steps)}/{len(final.steps)} done",
    )
    check(
        "invariant 1: Ready workers never below the start",
        watcher.min_ready >= watcher.start_ready,
        f"start {watcher.start_ready}, minimum {watcher.min_ready}",
    )
    sequential = all(
        a.finished_at and b.started_at and a.finished_at <= b.started_at for a, b in itertools.pairwise(masters)
    )
    first_worker = next((s for s in final.steps if s.role == "node"), None)
    check(
        "invariant 2: masters first, one at a time, only while all Ready, never surged",
        sequential
        and len(watcher.master_cordon_ready) == len(masters)
        and all(r == len(info.master_asgs) for _, r in watcher.master_cordon_ready)
        and all(v == 1 for v in watcher.master_desired_max.values())
        and bool(
            first_worker
            and masters
            and masters[-1].finished_at
            and first_worker.started_at
            and masters[-1].finished_at <= first_worker.started_at
        ),
        f"{len(masters)} masters in sequence; Ready masters when each was cordoned: "
        f"{[r for _, r in watcher.master_cordon_ready]}; highest master desired "
        f"{max(watcher.master_desired_max.values(), default=0)}",
    )
    ok3, detail3 = _drained_before_terminated(h, final, watcher.left_group_at)
    check("invariant 3: no instance terminated before its node was drained", ok3, detail3)
    in_groups = {i["InstanceId"] for g in after.values() for i in g["Instances"]}
    same = all(
        after[n]["DesiredCapacity"] == g["DesiredCapacity"] and after[n]["MaxSize"] == g["MaxSize"]
        for n, g in before.items()
    )
    lock = h.store.get("LOCK") or {}
    check(
        "invariant 4: every surge undone: desired and MaxSize back, nothing outside a group, lock released",
        same and h.running_instances() == in_groups and not lock.get("holder"),
        f"desired {sum(g['DesiredCapacity'] for g in before.values())} -> "
        f"{sum(g['DesiredCapacity'] for g in after.values())}, {len(h.running_instances() - in_groups)} "
        f"outside, lock holder {lock.get('holder')}",
    )
    check(
        "advancement came from events",
        bool(h.bus.events(source="node-manager.agent")) and not h.bus.events(source="aws.events"),
        "agent results and launches, no tick",
    )
    if watcher.errors:
        timeline.mark("world", f"watcher errors: {watcher.errors[:3]}")
