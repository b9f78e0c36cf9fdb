"""A schedule entry (``sim.schedules.Fault``) applied to the world: EC2 reclaiming Spot instances, outages, API
faults, Lambda crashes, late and bad events, forged command messages, agent restarts, kOps resets and spec edits,
operators, and other tools terminating instances (``sim.foreign``) (issue 12).

Shapes of the operators' inputs are the product's: the refresher's manual requests (``lambdas.events.request``),
``kubectl cordon`` (a merge patch of ``spec.unschedulable``, without the product's annotation). Bad events are the
ones docs/DESIGN.md invariant 7 names: malformed, another account's or region's, an instance no group of the cluster
holds.
"""

from __future__ import annotations

import contextlib
import copy
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent.drain.policy import is_control_plane
from agent.kube.views import CORDON_ANNOTATION
from core.exceptions import AwsRequestError, AwsUnavailableError
from sim.faults import FaultWindow
from sim.foreign import foreign_terminate
from sim.health import bad_bootstrap, node_not_ready
from sim.invariants import view_epoch
from sim.schedules import Fault

if TYPE_CHECKING:
    from sim.world import World


def apply_fault(world: World, f: Fault) -> None:
    """Start what ``f`` describes now (its later parts are scheduled on the world's kernel)."""
    handler = _HANDLERS.get(f.kind)
    if handler is None:
        raise ValueError(f"unknown fault kind {f.kind!r}")
    handler(world, f)


def _spot(world: World, f: Fault) -> None:
    instance = world.pick_instance(str(f.param("az")))
    if instance is not None:
        world.aws.interrupt(instance)


def _burst(world: World, f: Fault) -> None:
    count = int(f.param("count", 2))
    rng = world.kernel.stream("world:bursts")
    for _ in range(count):
        world.kernel.after(rng.uniform(0, f.duration), "fault spot (burst)", lambda: _spot(world, f))


def _rebalance(world: World, f: Fault) -> None:
    instance = world.pick_instance(str(f.param("az")))
    if instance is None:
        return
    world.aws.rebalance(instance)
    if int(f.param("follow", 0)):

        def reclaim() -> None:
            world.aws.interrupt(instance)

        world.kernel.after(f.duration, "fault spot (after rebalance)", reclaim)


def _outage(world: World, f: Fault) -> None:
    world.aws.capacity_outage(str(f.param("az")), f.at, f.at + f.duration)


def _api(world: World, f: Fault) -> None:
    window = FaultWindow(
        str(f.param("service")),
        str(f.param("operation")),
        f.at,
        f.at + f.duration,
        str(f.param("code")),
        float(f.param("probability", 1.0)),
    )
    world.add_fault_window(window)


def _crash(world: World, f: Fault) -> None:
    world.bus.crash(f.at, f.at + f.duration, str(f.param("function")), int(f.param("call", 1)), str(f.param("how")))


def _concurrent(world: World, f: Fault) -> None:
    function, other = str(f.param("function")), str(f.param("other"))
    world.bus.overlap(f.at, f.at + f.duration, function, int(f.param("call", 1)), other)


def _late(world: World, f: Fault) -> None:
    """An event delivered again, late (EventBridge's at-least-once delivery; the original id)."""
    if not world.history:
        return
    rng = world.kernel.stream("world:late")
    event = world.history[rng.randrange(len(world.history))]
    world.bus.put(copy.deepcopy(event))


def _bad(world: World, f: Fault) -> None:
    variant = str(f.param("variant"))
    instance = "i-0" + f"{world.kernel.stream('world:bad').getrandbits(64):016x}"
    detail: dict[str, Any] = {"instance-id": instance, "instance-action": "terminate"}
    event = world.bus.envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", detail, [])
    if variant == "malformed":
        event["detail"] = {"instance-action": "terminate"}
        event["time"] = "yesterday"
    elif variant == "foreign_account":
        event["account"] = "210987654321"
    elif variant == "foreign_region":
        event["region"] = "eu-west-1"
    world.mark_bad(str(event["id"]), variant)
    world.bus.put(event)


FORGER_HOLDS_SECONDS = 20.0  # how long a forger's receive hides the message it redirects (its visibility timeout)


def _forged(world: World, f: Fault) -> None:
    """A message on the agent's command queue that no Lambda sent for it (``variant``): not JSON (``garbage``);
    another cluster's (``foreign``); a drain of a worker with no ``CMD#`` item (``no_record``); a copy of the next
    command a Lambda sends, as it is (``replay``: a forger reading the queue, or SQS's at-least-once delivery) or
    redirected to another worker (``mismatch``: the forger also receives the original, which the agent then sees only
    ``FORGER_HOLDS_SECONDS`` later, after the copy), sent right after it while its command is still queued. The agent
    runs a body only as its ``CMD#`` item records it (``agent.consumer.decisions.bind_to_record``; docs/DESIGN.md
    invariant 9): whatever it then cordons or evicts is judged by invariants 5 and 8 like any other drain's."""
    from sim.world import CLUSTER

    variant, queue = str(f.param("variant")), world.aws.queue
    rng = world.kernel.stream("world:forged")
    workers = sorted(
        (str(obj["spec"].get("providerID", "")).rpartition("/")[2], name)
        for name, obj in world.kube.nodes.items()
        if not is_control_plane(obj["metadata"].get("labels") or {})
    )

    def send(body: str) -> None:
        with contextlib.suppress(AwsUnavailableError, AwsRequestError):  # the forger throttled too: nothing sent
            queue.send_body(body)

    def copy_of(message_id: str, body: str) -> None:
        command = json.loads(body)
        if variant == "mismatch":  # the original taken off the queue for a while: the agent sees the copy first
            command["instance_id"], command["node_name"] = rng.choice(workers)
            queue.received_elsewhere(message_id, FORGER_HOLDS_SECONDS)
        send(json.dumps(command))

    if variant in ("replay", "mismatch") and workers:
        queue.next_send.append(copy_of)
    elif variant == "garbage" or not workers:
        send('{"command_id": "forged", "kind": ')
    else:
        instance_id, node = rng.choice(workers)
        deadline = datetime.fromtimestamp(view_epoch(world.kernel.t + 600.0), UTC).isoformat()
        send(json.dumps(
            {"command_id": f"forged-{rng.getrandbits(64):016x}", "cluster": "another" if variant == "foreign" else
             CLUSTER, "kind": "drain", "instance_id": instance_id, "node_name": node, "reason": "refresh:forged",
             "deadline": deadline}
        ))  # fmt: skip


def _agent_restart(world: World, f: Fault) -> None:
    """The agent's process dies and starts again; with ``leader``, its leadership is lost instead and regained 15 s
    later (another replica led meanwhile: a new term)."""
    if int(f.param("leader", 0)):
        world.agent.lead(False)
        world.kernel.after(15.0, "fault agent leads again", lambda: world.agent.lead(True))
    else:
        world.agent.restart()


def _kops_reset(world: World, f: Fault) -> None:
    """``kops update cluster --yes``: the group's MinSize and MaxSize written back from its spec (desired capacity
    clamped into them)."""
    name = f"nodes-{f.param('az')}"
    if name in world.cloud.groups:
        min_size, max_size, _size = world.sizes[name]
        _kops_write(world, name, min_size, max_size)


def _kops_write(world: World, name: str, min_size: int, max_size: int) -> None:
    """kOps writes group ``name``'s MinSize and MaxSize (``sim.aws.SimAws.kops_reset``); the desired capacity units
    Auto Scaling's clamp takes away, each an instance of its choosing scaled in, are counted (``World.kops_taken``:
    invariant 1 does not count those losses against a refresh)."""
    before = world.cloud.groups[name].desired
    world.aws.kops_reset(name, min_size, max_size)
    world.kops_taken += max(0, before - world.cloud.groups[name].desired)


def _kops_spec(world: World, f: Fault) -> None:
    """``kops edit ig`` of the AZ's worker group, then ``kops update cluster --yes``: its spec's MinSize ``below``
    its size, its MaxSize ``above`` it (the size kept), both moved by ``grow`` for a resize (the ``resize``
    profile's), written to the group (``sim.aws.SimAws.kops_reset``: kOps writes no desired capacity, Auto Scaling
    clamps it into them). What the end check compares with follows: the size clamped into the new sizes (the group's
    size from then on), and the new MaxSize (``World.sizes_at_start``).

    A MaxSize written above the spec's before and at most the group's MaxSize now (a refresh's surge or a
    compensation holds it raised) is one the product cannot tell from its own raise: the refresher and the
    replenisher restore their original (``lambdas.refresher.decide.lifecycle.finish_groups``,
    ``lambdas.replenisher.decide.give_back``), so the end check also accepts the spec's MaxSizes before it
    (``World.spec_originals``: a raise made after such a restore counts from it) in ``World.restore_excused``. So is
    a MaxSize above the original and at most the MaxSize a raise of ours not yet restored recorded (``_our_raises``:
    the group's MaxSize may be lower by then, a spec edit before took it back): that original is accepted too."""
    name = f"nodes-{f.param('az')}"
    if name not in world.cloud.groups:
        return
    size, before, grow = world.sizes[name][2], world.sizes_at_start[name][1], int(f.param("grow", 0))
    min_size = max(0, size + grow - int(f.param("below", 0)))
    max_size = max(min_size, size + grow + int(f.param("above", 0)))
    size = min(max(size, min_size), max_size)  # moved only by a resize (``grow``)
    world.sizes[name] = (min_size, max_size, size)
    world.sizes_at_start[name] = (size, max_size)
    below = {value for value in {before} | world.spec_originals.get(name, set()) if value < max_size}
    world.spec_originals[name] = below  # the group's own MaxSizes a raise of ours may still count from
    excused = {original for original, raised_to in _our_raises(world, name) if original < max_size <= raised_to}
    excused |= below if max_size <= world.cloud.groups[name].max_size else set()
    if excused:
        world.restore_excused[name] = excused
    else:
        world.restore_excused.pop(name, None)
    _kops_write(world, name, min_size, max_size)


def _our_raises(world: World, name: str) -> list[tuple[int, int]]:
    """(original MaxSize, MaxSize raised to) of each raise of group ``name``'s MaxSize the table records as not
    restored yet: a refresh run's (``RUN#`` ``groups``: ``original_max``, ``max_raised_to``, ``max_restored``) and a
    compensation's (``COMP#`` donors: ``max_before``, ``max_target``, a state other than ``restored``)."""
    out = []
    for item in world.view.table_prefix("RUN#"):
        for g in item.get("groups") or []:
            if g.get("name") == name and g.get("max_raised_to") is not None and not g.get("max_restored"):
                out.append((int(g.get("original_max", 0)), int(g["max_raised_to"])))
    for item in world.view.table_prefix("COMP#"):
        donor = ((item.get("compensation") or {}).get("donors") or {}).get(name)
        if donor and donor.get("state") != "restored":
            out.append((int(donor.get("max_before", 0)), int(donor.get("max_target", 0))))
    return out


def _manual_refresh(world: World, f: Fault) -> None:
    """A manual refresh of every instance of the AZ's worker group (``lambdas.events.request``), with the entry's
    ``max_surge`` when it has one (the settings' default otherwise); with ``masters``, of every master group (one
    master at a time, only while all are Ready)."""
    from sim.world import CLUSTER

    groups = sorted(n for n in world.cloud.groups if n.startswith("master-")) if f.param("masters") else []
    request: dict[str, Any] = {
        "action": "refresh",
        "cluster": CLUSTER,
        "instance_groups": groups or [f"nodes-{f.param('az')}"],
        "all": True,
    }
    if f.param("max_surge"):
        request["max_surge"] = int(f.param("max_surge"))
    world.bus.deliver_now("refresher", request)


def _cancel(world: World, f: Fault) -> None:
    from sim.world import CLUSTER

    world.bus.deliver_now("refresher", {"action": "cancel", "cluster": CLUSTER})


def _operator_cordon(world: World, f: Fault) -> None:
    """``kubectl cordon`` of a schedulable worker of the AZ, ``kubectl uncordon`` ``duration`` later (only when the
    node is still cordoned by the operator)."""
    az = str(f.param("az"))
    candidates = sorted(
        name
        for name, obj in world.kube.nodes.items()
        if not obj["spec"].get("unschedulable") and obj["spec"].get("providerID", "").startswith(f"aws:///{az}/")
    )
    if not candidates:
        return
    name = world.kernel.stream("world:operator").choice(candidates)
    if not _patch(world, name, True):
        return
    world.operator_cordon(name, True)

    def uncordon() -> None:
        obj = world.kube.nodes.get(name)
        world.operator_cordon(name, False)
        if obj is not None and CORDON_ANNOTATION not in obj["metadata"].get("annotations", {}):
            _patch(world, name, False)

    world.kernel.after(f.duration, "fault operator uncordon", uncordon)


def _patch(world: World, node: str, unschedulable: bool) -> bool:
    """kubectl's merge patch of ``spec.unschedulable``; False when the API refused it (a fault: the operator gives
    up)."""
    try:
        return world.kube.patch_node(node, {"spec": {"unschedulable": unschedulable}}) is not None
    except Exception:  # noqa: BLE001 - an injected API fault: the operator's command failed, nothing changed
        return False


def _pdb_block(world: World, f: Fault) -> None:
    """A PodDisruptionBudget allowing no disruption (``minAvailable: 100%``) over one Deployment without a budget;
    ``duration`` later it is edited to allow any (``maxUnavailable: 100%``), as good as deleted."""
    from sim.kube_objects import Budget

    taken = {str(b.selector.get("app")) for b in world.kube.budgets.values()}
    free = sorted(d.name for d in world.kube.deployments.values() if d.name not in taken)
    if not free:
        return
    app = world.kernel.stream("world:pdb").choice(free)
    key = f"default/{app}-blocker"
    world.kube.add_budget(Budget("default", f"{app}-blocker", {"app": app}, min_available="100%"))

    def remove() -> None:
        world.kube.budgets[key] = Budget("default", f"{app}-blocker", {"app": app}, max_unavailable="100%")

    world.kernel.after(f.duration, "fault pdb unblock", remove)


_HANDLERS = {
    "spot": _spot,
    "spot_burst": _burst,
    "rebalance": _rebalance,
    "outage": _outage,
    "api": _api,
    "crash": _crash,
    "concurrent": _concurrent,
    "late_event": _late,
    "bad_event": _bad,
    "forged_message": _forged,
    "agent_restart": _agent_restart,
    "kops_reset": _kops_reset,
    "kops_spec": _kops_spec,
    "manual_refresh": _manual_refresh,
    "cancel_refresh": _cancel,
    "operator_cordon": _operator_cordon,
    "pdb_block": _pdb_block,
    "node_not_ready": node_not_ready,
    "bad_bootstrap": bad_bootstrap,
    "foreign_terminate": foreign_terminate,
}
