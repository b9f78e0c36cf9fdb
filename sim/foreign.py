"""Another tool or a person terminating an instance of a worker group (``storm`` only): ``kops delete instance``,
``aws autoscaling terminate-instance-in-auto-scaling-group``, an ASG instance refresh or Karpenter removing "surge
nodes" it did not make (a known weakness of kOps rolling-update users).

- ``foreign_terminate``: TerminateInstanceInAutoScalingGroup of one live instance of the AZ's worker group
  (``nodes-<az>``), the newest one (``target`` ``spare``: a refresh's surge spare or a compensation's instance when
  one is in flight) or one drawn from the world's stream (``any``), with ShouldDecrementDesiredCapacity ``decrement``.
  The call goes through the simulated Auto Scaling's own port (``sim.autoscaling.SimAutoScaling.terminate_in_group``),
  so it answers as it answers the product (a decrement at MinSize refused with ``ValidationError``, the API fault
  windows: a refused or throttled call changes nothing, the tool gives up), but not through the Lambdas' tripwire:
  the checker never takes it for one of the product's calls. The tool does not wait on the group's termination
  lifecycle hook (it completes the action itself, as ``kops delete instance --cloudonly`` or a person in a hurry does):
  no drain, no warning, the node's pods die with it. The product sees the lifecycle action's event, the instance
  already going, and the group's desired capacity one lower when ``decrement``.

What the checker is told (``Foreign``): the instance terminated (invariant 1 counts it as Spot's reclaims without a
warning, ``sim.ready_count``: a node of a run's start gone is in neither count, a node that came during the run is
excused until a node comes in its group after it, which with ``decrement`` only the product's own answer brings) and
the desired capacity units it took away below the group's start (``World.sizes_at_start``) per group: the end check
of sizes accepts a desired capacity that many below the start, never below MinSize, never above the start
(``Foreign.accepts``). A unit taken while a raise of ours held the group above its start was ours (a surge's, a
compensation's): the product is to end the group at its start all the same (``lambdas.refresher.decide.replace
.unit_taken``, the replenisher's give-back of a donor resized by someone else), so it does not lower the floor.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.exceptions import AwsRequestError, AwsUnavailableError
from sim.schedules import Fault

if TYPE_CHECKING:
    from sim.world import World


@dataclass
class Foreign:
    """What foreign terminations did: the instances terminated (-> simulated second) and the desired capacity units
    taken away below the group's start, per group."""

    terminated: dict[str, float] = field(default_factory=dict)
    decrements: dict[str, int] = field(default_factory=dict)

    def lowest(self, group: str, start: int, min_size: int) -> int:
        """The lowest desired capacity group ``group`` may end at from ``start``: one below per unit taken away,
        never below ``min_size`` (nor above ``start``)."""
        return min(start, max(min_size, start - self.decrements.get(group, 0)))

    def accepts(self, group: str, desired: int, start: int, min_size: int) -> bool:
        """Whether ``desired`` is an end the units taken away explain (``start`` itself is always one)."""
        return self.lowest(group, start, min_size) <= desired <= start


def foreign_terminate(world: World, f: Fault) -> None:
    """Terminate one live instance of ``nodes-<az>`` as another tool would (module docstring)."""
    name = f"nodes-{f.param('az')}"
    group = world.cloud.groups.get(name)
    if group is None:
        return
    live = sorted((i for i in group.active() if i.alive), key=lambda i: (i.started, i.instance_id))
    if not live:
        return
    inst = live[-1] if f.param("target") == "spare" else world.kernel.stream("world:foreign").choice(live)
    before, t = group.desired, world.kernel.t
    with contextlib.suppress(AwsUnavailableError, AwsRequestError):  # refused or throttled: the tool gives up
        world.aws.autoscaling.terminate_in_group(inst.instance_id, bool(int(f.param("decrement", 0))))
    foreign = world.checker.foreign
    start = world.sizes_at_start[name][0]
    if (below := max(0, start - group.desired) - max(0, start - before)) > 0:  # a unit above the start was ours
        foreign.decrements[name] = foreign.decrements.get(name, 0) + below
    if inst.wait is not None:  # the tool does not wait on the termination lifecycle hook
        world.cloud.complete(inst)
    if not inst.alive:
        foreign.terminated[inst.instance_id] = t
        world.checker.ready.foreign_terminated(inst.instance_id, t)
        world.trace.add(f"{t:.3f} foreign terminate {name} {inst.instance_id} desired {before} -> {group.desired}")
