"""Scenario: a Spot interruption warning for a worker of a kOps cluster, end to end on the local world.

What runs for real: the interruption Lambda's handler (in this process, against moto), the agent (``python -m
agent``, its own process, with its own least-privilege Kubernetes identity), moto's Auto Scaling (which launches the
replacement when the instance is detached), and kube-apiserver + etcd (the simulator plays kubelets and controllers).

The verdict checks what DESIGN.md promises for this path (invariants 3, 4, 5, 6, 7) and the issue's promise:
the node is cordoned and drained before the deadline (event time + 120 s) and the replacement is already launching.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3

from adapters.dynamo.store import Store
from core.model import CommandStatus
from core.settings import AgentSettings, InterruptionSettings
from lambdas.interruption.handler import Deps, handle
from localworld.aws import aws_env
from localworld.lambda_context import INTERRUPTION_FUNCTION, LocalLambdaContext
from localworld.workloads import deploy_workloads, pods_on_node, wait_pods_ready
from localworld.world import LocalWorld
from scenarios.observe import AsgWatcher, NodeWatcher, PdbGuard, wait_until
from scenarios.settings import settings_env, user_settings
from scenarios.timeline import Timeline, stamp_actions

EVENTS = Path(__file__).resolve().parent.parent / "tests" / "events"
NAMESPACE = "workloads"


def spot_warning(instance_id: str, region: str, when: datetime, action: str = "terminate") -> dict[str, Any]:
    """The documented sample event (tests/events/spot-interruption-warning.json) for ``instance_id`` at ``when``."""
    event: dict[str, Any] = json.loads((EVENTS / "spot-interruption-warning.json").read_text())
    event["id"] = str(uuid.uuid4())
    event["time"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["region"] = region
    event["resources"] = [f"arn:aws:ec2:{region}:{event['account']}:instance/{instance_id}"]
    event["detail"] = {"instance-id": instance_id, "instance-action": action}
    return event


def _pick_target(world: LocalWorld) -> tuple[str, str]:
    """The worker node carrying the most workload pods (a bare pod on it if possible): (node name, instance id)."""
    best: tuple[int, str, str] | None = None
    for node in world.running_simulator().nodes():
        labels = node["metadata"].get("labels", {})
        if "node-role.kubernetes.io/node" not in labels:
            continue
        pods = [p for p in pods_on_node(world.api, node["metadata"]["name"]) if p["metadata"]["namespace"] == NAMESPACE]
        bare = any(not p["metadata"].get("ownerReferences") for p in pods)
        score = len(pods) + (100 if bare else 0)
        instance_id = node["spec"]["providerID"].rsplit("/", 1)[1]
        if best is None or score > best[0]:
            best = (score, node["metadata"]["name"], instance_id)
    if best is None:
        raise RuntimeError("no worker node in the cluster")
    return best[1], best[2]


def run(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
    """Play the scenario on a started world; the checks land in ``timeline``.

    The Lambda runs in this process and reads its environment as it would in AWS; that environment (the moto
    endpoint among it) is this call's only: ``os.environ`` is put back as it was when the scenario ends, so nothing
    run later in the process (a test in the same pytest session) talks to the world's moto server by accident.
    """
    saved = dict(os.environ)
    try:
        _play(world, timeline, log_dir)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _play(world: LocalWorld, timeline: Timeline, log_dir: Path) -> None:
    info = world.setup_cluster()
    asg_client = world.client("autoscaling")
    timeline.mark(
        "world",
        f"kOps cluster {info.name}: {len(info.master_asgs)} master ASGs, "
        f"{len(info.worker_asgs)} Spot worker ASGs, {len(world.running_simulator().nodes())} nodes Ready",
    )
    workloads = deploy_workloads(world.api, NAMESPACE)
    # controlled pods + one DaemonSet pod per node + the bare pod
    expected = workloads.controlled_pods + len(world.running_simulator().nodes()) + 1
    wait_pods_ready(world.api, NAMESPACE, expected, timeout=30)
    timeline.mark("world", "workloads running: Deployments with PDBs, a DaemonSet, an emptyDir pod, a bare pod")

    agent = world.spawn("agent", user_settings(AgentSettings), log_dir / "agent.log")
    store = Store(world.resource("dynamodb").Table(info.table_name), info.name)
    node_count = len(world.running_simulator().nodes())
    wait_until(lambda: len(store.list_nodes(max_age_seconds=600)) >= node_count, 60, "the agent to report membership")
    timeline.mark("agent", f"membership reported: {node_count} nodes mapped to instances and ASGs (pid {agent.pid})")

    node_name, instance_id = _pick_target(world)
    asg_name = next(
        r["AutoScalingGroupName"]
        for r in asg_client.describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"]
    )
    before = asg_client.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]
    pods_before = {p["metadata"]["name"] for p in pods_on_node(world.api, node_name)}
    timeline.mark(
        "world",
        f"target: node {node_name} = {instance_id} in {asg_name} "
        f"(desired {before['DesiredCapacity']}, {len(pods_before)} pods)",
    )

    node_watch = NodeWatcher(world.api, node_name, timeline)
    pdb_guard = PdbGuard(world.api, NAMESPACE)
    asg_watch = AsgWatcher(asg_client, asg_name, timeline)
    for watcher in (node_watch, pdb_guard, asg_watch):
        watcher.start()
    time.sleep(0.2)  # let the watchers take their first look

    # The environment the CDK stack gives the Lambda (infra/interruption.py), minus what ClusterInfo.env() has.
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "interruption")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "NodeManager")
    os.environ.update(aws_env(world.moto.endpoint_url, world.region))
    settings = InterruptionSettings.from_env(settings_env(InterruptionSettings, info.env()))  # the user's settings too
    now = datetime.now(UTC).replace(microsecond=0)
    event = spot_warning(instance_id, world.region, now)
    deadline = now + timedelta(seconds=settings.spot_deadline_seconds)
    timeline.mark(
        "lambda",
        f"EC2 Spot Instance Interruption Warning {event['id'][:8]} received "
        f"(instance-action terminate, deadline {deadline:%H:%M:%S})",
    )
    deps = Deps.from_session(settings, boto3.session.Session())
    deps.register_context(LocalLambdaContext(30, INTERRUPTION_FUNCTION))
    timeline.mark("lambda", "cold start done: settings read, clients built")
    lambda_log = (log_dir / "lambda.log").open("a")
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):  # the Lambda's JSON logs and metrics go to its own log
        response = handle(event, deps)
    lambda_log.write(captured.getvalue())
    # each action where its log line says it was applied, not when the handler returned (the agent may act before)
    descriptions = [str(a.get("action", a) if isinstance(a, dict) else a) for a in response.get("actions", [])]
    for description, when in zip(descriptions, stamp_actions(descriptions, captured.getvalue()), strict=True):
        timeline.mark("lambda", description, at=None if when is None else timeline.mono(when))
    returned = timeline.mark("lambda", f"handler returned: {response['status']}")
    command_id = next(
        (a.get("command_id") for a in response.get("actions", []) if isinstance(a, dict) and a.get("command_id")), None
    )
    command_id = command_id or f"spot-{event['id']}"

    def terminal() -> dict[str, Any] | None:
        item = store.get_command(command_id)
        return item if item and CommandStatus(item["status"]).terminal else None

    item = wait_until(terminal, 150, f"command {command_id} to finish")
    result = item.get("result", {})
    finished_wall = datetime.fromisoformat(item["finished_at"])
    finished_at = timeline.mono(finished_wall)
    for pod in sorted(result.get("pods", []), key=lambda p: p.get("evicted_at") or ""):
        why = f" ({pod['reason']})" if pod.get("reason") else ""
        acted = timeline.mono(datetime.fromisoformat(pod["evicted_at"])) if pod.get("evicted_at") else finished_at
        timeline.mark("agent", f"pod {pod['namespace']}/{pod['name']}: {pod['action']}{why}", at=acted)
    took = result.get("durations", {}).get("total")
    timeline.mark(
        "agent",
        f"drain {item['status']}" + (f" in {took:.3f} s" if took is not None else "") + ": "
        f"{result.get('message', '')}",
        at=finished_at,
    )

    # The replacement: launched by the ASG when the instance was detached, then registered Ready by the simulator.
    new_id = ""
    if settings.early_replacement:
        replacement = wait_until(lambda: set(asg_watch.launched), 30, "the replacement instance")
        new_id = sorted(replacement)[0]
        wait_until(
            lambda: (
                (n := world.running_simulator().node_for_instance(new_id))
                and any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", [])
                )
            ),
            30,
            "the replacement node to be Ready",
        )
        timeline.mark("kubernetes", f"replacement node for {new_id} Ready")
    else:
        timeline.mark("world", "EARLY_REPLACEMENT=false: the instance stays in its group until Spot reclaims it")

    # A duplicate delivery of the same event (EventBridge delivers at least once) changes nothing.
    with contextlib.redirect_stdout(lambda_log):
        again = handle(event, deps)
    lambda_log.close()
    timeline.mark(
        "lambda",
        f"duplicate delivery of {event['id'][:8]}: "
        + (
            f"nothing done again (the first answer, {again['status']!r}, replayed from the idempotency record)"
            if again.get("replayed")
            else str(again["status"])
        ),
    )

    # Spot reclaims the instance at the deadline; the local world plays it now that the drain is over.
    reclaim_sent = time.monotonic() - timeline.start  # moto's ASG may launch the replacement before the call returns
    world.client("ec2").terminate_instances(InstanceIds=[instance_id])
    reclaimed = timeline.mark("aws", f"Spot reclaims {instance_id} (terminated)")
    wait_until(
        lambda: node_watch.deleted_at is not None or world.running_simulator().node_for_instance(instance_id) is None,
        30,
        "the old node to go",
    )
    time.sleep(0.3)
    for watcher in (pdb_guard, asg_watch):
        watcher.stop()
    node_watch.stop()
    after = asg_client.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]
    daemonset_left = [p for p in result.get("pods", []) if p.get("action") == "skip"]

    check = timeline.check
    check(
        "drained before the deadline",
        item["status"] == "succeeded" and finished_wall <= deadline,
        f"status {item['status']}, finished {finished_wall:%H:%M:%S.%f}"[:-3] + f", deadline {deadline:%H:%M:%S}",
    )
    check(
        "cordoned by the agent before any eviction",
        node_watch.cordoned_by == command_id,
        f"cordon annotation {node_watch.cordoned_by!r}",
    )
    finished_rel = finished_at - timeline.start
    detached = any(
        "without decrement" in str(a.get("action", "")) for a in response.get("actions", []) if isinstance(a, dict)
    )
    # The executor sends the drain before it detaches, so a fast drain may end before DetachInstances returns; what
    # early replacement promises is a replacement launched at the warning, not two minutes later at the reclaim.
    if settings.early_replacement:
        launched_rel = asg_watch.launched.get(new_id, float("inf")) - timeline.start
        check(
            "replacement launched at the warning, before the reclaim",
            detached and returned.at < reclaimed.at and launched_rel < reclaimed.at,
            f"DetachInstances without decrement returned at {returned.at:.3f}s, replacement {new_id} seen in the ASG "
            f"at {launched_rel:.3f}s, reclaim at {reclaimed.at:.3f}s",
        )
    else:
        early = sorted(i for i, at in asg_watch.launched.items() if at - timeline.start < reclaim_sent)
        check(
            "EARLY_REPLACEMENT=false: not detached, nothing launched before the reclaim",
            not detached and not early,
            f"detached: {detached}, launched before the reclaim: {early or 'none'}",
        )
    check(
        "invariant 3: instance terminated only after its node was drained",
        item["status"] == "succeeded" and reclaimed.at > finished_rel,
        f"drain finished at {finished_rel:.3f}s, reclaim at {reclaimed.at:.3f}s",
    )
    # Without early replacement the ASG replaces the reclaimed instance on its own schedule (moto: not at all)
    remaining = [i for i in after["Instances"] if i["InstanceId"] != instance_id]
    check(
        "invariant 4: desired capacity ends where it was, no extra instance",
        after["DesiredCapacity"] == before["DesiredCapacity"]
        and (
            len(after["Instances"]) == before["DesiredCapacity"] and len(remaining) == len(after["Instances"])
            if settings.early_replacement
            else len(remaining) <= before["DesiredCapacity"]
        ),
        f"desired {before['DesiredCapacity']} -> {after['DesiredCapacity']}, {len(after['Instances'])} instances",
    )
    check(
        "invariant 5: PodDisruptionBudgets honoured, DaemonSet pods stayed",
        not pdb_guard.violations
        and pdb_guard.samples > 0
        and any("daemonset" in (p.get("reason") or "") for p in daemonset_left),
        f"{pdb_guard.samples} PDB samples, violations {pdb_guard.violations[:3]}, "
        f"{len(daemonset_left)} pod{'' if len(daemonset_left) == 1 else 's'} left in place",
    )
    check(
        "invariant 7: the duplicate event changed nothing",
        again["status"] in ("acted", "acknowledged")
        and (again.get("replayed") or again.get("reason") == "duplicate")
        and len(list(store.query_prefix("CMD#"))) == 1,
        f"second delivery answered {again['status']!r} "
        + ("by replaying the first's answer" if again.get("replayed") else f"(reason {again.get('reason')!r})")
        + f", {len(list(store.query_prefix('CMD#')))} command(s) recorded in all",
    )
    check("the agent is still running", agent.alive(), f"pid {agent.pid}")
