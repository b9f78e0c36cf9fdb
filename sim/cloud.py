"""The physics of the simulated account: Auto Scaling keeping each group at its desired capacity, EC2 instances booting
and shutting down, Spot interruptions, termination lifecycle hooks and capacity outages, on simulated time.

Followed documentation (EC2 Auto Scaling User Guide unless named):

- "Amazon EC2 Auto Scaling instance lifecycle": an instance counts toward the desired capacity while ``Pending`` or
  ``InService``; once it is ``Terminating`` (or detached) it no longer does, so the group launches its replacement
  at once ("Replace unhealthy instances": an instance EC2 stopped or terminated is unhealthy and replaced).
- "Amazon EC2 Auto Scaling lifecycle hooks": a termination hook holds the instance in ``Terminating:Wait`` until
  CompleteLifecycleAction or the heartbeat timeout (a heartbeat starts it again; 100 x it or 48 h at most in all),
  for every termination (scale-in, TerminateInstanceInAutoScalingGroup, health check replacement), not a detach.
  Only the group's first hook is modelled (the stack adds one, ``node-manager-drain``).
- "Amazon EC2 Auto Scaling event reference": each failed launch attempt is an "EC2 Instance Launch Unsuccessful"
  event, each launch an "EC2 Instance Launch Successful" one. Which AZ, which victim, how long to back off:
  ``sim.asg_policy``.
- "Spot Instance interruption notices" (EC2 User Guide): the warning comes two minutes before EC2 terminates the
  instance; "EC2 instance rebalance recommendations" is a signal only.
- "Amazon EC2 instance state changes" (EC2 User Guide): ``pending`` -> ``running`` (here 30-60 s),
  ``shutting-down`` -> ``terminated`` (here 5-30 s); a terminated instance stays visible for about an hour. Each
  change is an "EC2 Instance State-change Notification".

A reconcile runs every ``ASG_RECONCILE_SECONDS`` over the groups something changed in (the others are at their
desired capacity already), so a 1,000-instance fleet costs little per tick. ``on_running(instance)`` is called when
an instance enters ``running`` (its node may join Kubernetes), ``on_terminated(instance)`` when it stops running
(``shutting-down``: its node and pods are gone from then on).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from sim.asg_policy import Outage, launch_backoff, launch_zone, no_capacity_message, scale_in_victims
from sim.aws_common import Emit, EventSource
from sim.aws_state import (
    ACTIVE_STATES,
    TERMINATING_STATES,
    Group,
    Instance,
    InstanceCallback,
    LaunchTemplate,
    LifecycleWait,
    _nothing,
    kops_tags,
)
from sim.aws_state import TerminationHook as TerminationHook
from sim.kernel import Kernel

ASG_RECONCILE_SECONDS = 10.0
SPOT_NOTICE_SECONDS = 120.0
BOOT_SECONDS = (30.0, 60.0)
SHUTDOWN_SECONDS = (5.0, 30.0)
TERMINATED_VISIBLE_SECONDS = 3600.0


class Cloud:
    """Groups, instances and templates of one account and region, and what Auto Scaling and EC2 do with them.

    Args:
        kernel: simulated time, scheduling and the ``aws:*`` random streams.
        emit: receives every event AWS would put on the default bus (EventBridge envelope).
        on_running, on_terminated: see the module docstring.
    """

    def __init__(
        self,
        kernel: Kernel,
        emit: Emit,
        *,
        account: str = "123456789012",
        region: str = "us-east-1",
        on_running: InstanceCallback = _nothing,
        on_terminated: InstanceCallback = _nothing,
    ) -> None:
        self.kernel = kernel
        self.account = account
        self.region = region
        self.events = EventSource(kernel, emit, account, region)
        self.on_running = on_running
        self.on_terminated = on_terminated
        self.groups: dict[str, Group] = {}
        self.instances: dict[str, Instance] = {}
        self.templates: dict[str, LaunchTemplate] = {}
        self.outages: list[Outage] = []
        self.launched = 0
        self.failed_launches = 0
        self.ended_seconds = 0.0  # instance-seconds of instances no longer running
        self._dirty: set[str] = set()
        self._died: dict[str, list[Instance]] = {}  # members EC2 terminated, by group, until the health check
        self._ids = kernel.stream("aws:instance-ids")
        self._timing = kernel.stream("aws:timing")
        self._tokens = kernel.stream("aws:lifecycle-tokens")
        self._policy = kernel.stream("aws:termination-policy")
        self._started = False

    def start(self) -> None:
        """Start the reconcile loop (once)."""
        if not self._started:
            self._started = True
            self.kernel.every(ASG_RECONCILE_SECONDS, "aws:reconcile", self.reconcile)

    # -- setup -----------------------------------------------------------------------------------------------
    def add_template(self, name: str) -> LaunchTemplate:
        """A launch template at version 1 (id from the ``aws:instance-ids`` stream)."""
        template = LaunchTemplate(f"lt-{self._ids.getrandbits(68):017x}", name)
        self.templates[template.template_id] = template
        return template

    def new_template_version(self, template_id: str, make_default: bool = False) -> int:
        """CreateLaunchTemplateVersion (and ModifyLaunchTemplate to make it the default): the new version number."""
        template = self.templates[template_id]
        template.latest_version += 1
        if make_default:
            template.default_version = template.latest_version
        return template.latest_version

    def add_group(
        self,
        name: str,
        *,
        cluster: str,
        instance_group: str,
        zones: tuple[str, ...],
        min_size: int,
        max_size: int,
        desired: int,
        instance_type: str = "m5.large",
        spot: bool = True,
        control_plane: bool = False,
        template: LaunchTemplate | None = None,
        template_version: str = "$Latest",
        hooks: tuple[TerminationHook, ...] = (),
        prelaunch: bool = True,
        prelaunch_age: float = 0.0,
    ) -> Group:
        """A group with kOps' tags; with ``prelaunch`` its desired instances exist already, running and
        ``InService`` (no events: the simulation starts in a steady state; ``on_running`` is called for each),
        launched up to ``prelaunch_age`` seconds ago (drawn from ``aws:timing``)."""
        if not min_size <= desired <= max_size:
            raise ValueError(f"group {name}: desired {desired} outside [{min_size}, {max_size}]")
        group = Group(
            name=name,
            group_id=self.events.uuid(self._ids),
            zones=zones,
            min_size=min_size,
            max_size=max_size,
            desired=desired,
            instance_type=instance_type,
            spot=spot,
            template=template or self.add_template(f"{instance_group}.{cluster}"),
            template_version=template_version,
            tags=kops_tags(cluster, instance_group, control_plane),
            created=self.kernel.now(),
            hooks=hooks,
        )
        self.groups[name] = group
        active: list[Instance] = []
        for _ in range(desired if prelaunch else 0):
            zone = launch_zone(zones, instance_type, active, (), self.kernel.t)
            active.append(self._launch(group, zone, booted=True))
            age = self._timing.uniform(0.0, prelaunch_age) if prelaunch_age else 0.0
            active[-1].launch_time = self.kernel.now() - timedelta(seconds=age)
        self.touch(group)
        return group

    def touch(self, group: Group) -> None:
        """The group changed: its description is new, and the next reconcile looks at it."""
        group.revision += 1
        self._dirty.add(group.name)

    # -- Auto Scaling effects (validated by sim.autoscaling) ------------------------------------------------
    def set_sizes(self, name: str, min_size: int, max_size: int, desired: int) -> None:
        """New sizes (UpdateAutoScalingGroup, or kOps writing them back)."""
        group = self.groups[name]
        group.min_size, group.max_size, group.desired = min_size, max_size, desired
        self.touch(group)

    def terminate_in_group(self, instance_id: str, decrement: bool) -> None:
        """TerminateInstanceInAutoScalingGroup of a member (decrementing the desired capacity or not)."""
        inst = self.instances[instance_id]
        group = self.groups[str(inst.group)]
        if inst.lifecycle_state in TERMINATING_STATES:
            return  # already on its way: accepted, nothing changes (no second decrement)
        if decrement:
            group.desired -= 1
        self._begin_termination(group, inst)
        self.touch(group)

    def detach(self, instance_id: str, decrement: bool) -> None:
        """DetachInstances of a member: it leaves the group and keeps running."""
        inst = self.instances[instance_id]
        group = self.groups[str(inst.group)]
        del group.members[instance_id]
        inst.group = None
        inst.set_lifecycle("")
        if decrement:
            group.desired -= 1
        self.touch(group)

    def active_wait(self, group: str, hook: str, token: str, instance_id: str) -> Instance | None:
        """The instance whose lifecycle action this is, if that action is still active (a token, if given, must
        match: Auto Scaling identifies the action by instance id or token)."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.group != group or inst.wait is None or inst.wait.hook.name != hook:
            return None
        return inst if not token or token == inst.wait.token else None

    def complete(self, inst: Instance) -> None:
        """CompleteLifecycleAction (CONTINUE or ABANDON: for a termination both terminate)."""
        self._proceed(inst)

    def heartbeat(self, inst: Instance) -> None:
        """RecordLifecycleActionHeartbeat: the heartbeat timeout starts again (within the global timeout)."""
        wait = inst.wait
        assert wait is not None
        wait.timer.cancel()
        until = min(self.kernel.t + wait.hook.heartbeat_timeout, wait.started + wait.hook.global_timeout)
        wait.timer = self.kernel.at(until, f"aws:hook-timeout {inst.instance_id}", self._timeout(inst, wait.token))

    # -- EC2 effects -----------------------------------------------------------------------------------------
    def ec2_terminate(self, instance_id: str) -> None:
        """EC2 terminates the instance (TerminateInstances, a Spot reclaim): ``shutting-down`` now, ``terminated``
        a few seconds later; nothing when it is not running any more."""
        inst = self.instances.get(instance_id)
        if inst is None or not inst.alive:
            return
        inst.state, inst.gone_at = "shutting-down", self.kernel.t
        self.ended_seconds += self.kernel.t - inst.started
        self.events.state_change(instance_id, "shutting-down")
        if inst.group is not None:
            self._died.setdefault(inst.group, []).append(inst)  # unhealthy at the group's next health check
            self.touch(self.groups[inst.group])
        self.on_terminated(inst)
        self.kernel.after(
            self._timing.uniform(*SHUTDOWN_SECONDS), f"aws:terminated {instance_id}", lambda: self._terminated(inst)
        )

    # -- the reconcile loop ----------------------------------------------------------------------------------
    def reconcile(self) -> None:
        """One pass of Auto Scaling over the groups that changed: replace unhealthy members, launch toward the
        desired capacity, scale in above it."""
        if not self._dirty:
            return
        for name in [n for n in self.groups if n in self._dirty]:
            group = self.groups[name]
            self._dirty.discard(name)
            for inst in self._died.pop(name, []):
                if inst.group == name and inst.lifecycle_state in ACTIVE_STATES:
                    inst.set_lifecycle(inst.lifecycle_state, health="Unhealthy")  # _begin_termination: a revision
                    self._begin_termination(group, inst)
            active = group.active()
            if len(active) < group.desired:
                self._scale_out(group, active)
            elif len(active) > group.desired:
                self._scale_in(group, active, len(active) - group.desired)

    def _scale_out(self, group: Group, active: list[Instance]) -> None:
        now = self.kernel.t
        if now < group.launch_backoff_until:
            self._dirty.add(group.name)  # look again once the backoff is over
            return
        current = len(active)
        for k in range(group.desired - current):
            zone = launch_zone(group.zones, group.instance_type, active, self.outages, now)
            if zone is None:
                group.launch_failures += 1
                self.failed_launches += 1
                group.launch_backoff_until = now + launch_backoff(group.launch_failures)
                wanted = launch_zone(group.zones, group.instance_type, active, (), now) or group.zones[0]
                message = no_capacity_message(group.spot, group.instance_type, wanted)
                self.events.launch(group.group_id, group.name, wanted, "", (current + k, current + k + 1), message)
                self._dirty.add(group.name)
                return
            active.append(self._launch(group, zone))
        group.launch_failures = 0
        group.launch_backoff_until = 0.0

    def _scale_in(self, group: Group, active: list[Instance], extra: int) -> None:
        current = group.template.resolve(group.template_version)
        for victim in scale_in_victims(active, extra, current, self._policy):
            self._begin_termination(group, victim)

    # -- instance lifecycle ----------------------------------------------------------------------------------
    def _launch(self, group: Group, zone: str | None, booted: bool = False) -> Instance:
        assert zone is not None
        instance_id = f"i-{self._ids.getrandbits(68):017x}"
        version = group.template.resolve(group.template_version)
        tags = dict(group.tags)
        tags.update(
            {
                "aws:autoscaling:groupName": group.name,
                "aws:ec2launchtemplate:id": group.template.template_id,
                "aws:ec2launchtemplate:version": version,
            }
        )
        inst = Instance(
            instance_id=instance_id,
            zone=zone,
            instance_type=group.instance_type,
            lifecycle="spot" if group.spot else "",
            launch_time=self.kernel.now(),
            started=self.kernel.t,
            template_id=group.template.template_id,
            template_version=version,
            tags=tags,
            group=group.name,
            lifecycle_state="Pending",
        )
        self.instances[instance_id] = inst
        group.members[instance_id] = inst
        group.revision += 1
        self.launched += 1
        if booted:
            inst.state = "running"
            inst.set_lifecycle("InService")
            self.on_running(inst)
        else:
            self.events.state_change(instance_id, "pending")
            self.kernel.after(
                self._timing.uniform(*BOOT_SECONDS), f"aws:running {instance_id}", lambda: self._running(inst)
            )
        return inst

    def _running(self, inst: Instance) -> None:
        if inst.state != "pending":
            return
        inst.state = "running"
        self.events.state_change(inst.instance_id, "running")
        group = self.groups.get(inst.group or "")
        if group is not None and inst.lifecycle_state == "Pending":
            inst.set_lifecycle("InService")
            group.revision += 1
            size = len(group.members)  # (the Cause's text only)
            self.events.launch(group.group_id, group.name, inst.zone, inst.instance_id, (size - 1, size))
        self.on_running(inst)

    def _begin_termination(self, group: Group, inst: Instance) -> None:
        if not group.hooks:
            self._proceed(inst)
            return
        hook = group.hooks[0]
        token = self.events.uuid(self._tokens)
        inst.set_lifecycle("Terminating:Wait")
        group.revision += 1
        timer = self.kernel.after(
            hook.heartbeat_timeout, f"aws:hook-timeout {inst.instance_id}", self._timeout(inst, token)
        )
        inst.wait = LifecycleWait(hook, token, self.kernel.t, timer)
        self.events.lifecycle_action(group.group_id, group.name, inst.instance_id, hook.name, token)

    def _timeout(self, inst: Instance, token: str) -> Callable[[], None]:
        def expire() -> None:
            if inst.wait is not None and inst.wait.token == token:
                self._proceed(inst)  # the hook's default result: CONTINUE or ABANDON, both terminate

        return expire

    def _proceed(self, inst: Instance) -> None:
        if inst.wait is not None:
            inst.wait.timer.cancel()
            inst.wait = None
        inst.set_lifecycle("Terminating:Proceed")
        if inst.group in self.groups:
            self.groups[inst.group].revision += 1
        if inst.state == "terminated":
            self._leave_group(inst)
        else:
            self.ec2_terminate(inst.instance_id)

    def _terminated(self, inst: Instance) -> None:
        inst.state = "terminated"
        self.events.state_change(inst.instance_id, "terminated")
        if inst.lifecycle_state == "Terminating:Proceed":
            self._leave_group(inst)
        self.kernel.after(TERMINATED_VISIBLE_SECONDS, f"aws:forget {inst.instance_id}", lambda: self._forget(inst))

    def _leave_group(self, inst: Instance) -> None:
        group = self.groups.get(inst.group or "")
        if group is not None:
            group.members.pop(inst.instance_id, None)
            self.touch(group)
        inst.group = None
        inst.set_lifecycle("")
        if inst.state == "terminated" and inst.gone_at is not None:
            # held in Terminating:Wait past EC2's hour of visibility: forgotten now that the group let it go
            left = inst.gone_at + TERMINATED_VISIBLE_SECONDS - self.kernel.t
            self.kernel.after(max(0.0, left), f"aws:forget {inst.instance_id}", lambda: self._forget(inst))

    def _forget(self, inst: Instance) -> None:
        if self.instances.get(inst.instance_id) is inst and inst.group is None:
            del self.instances[inst.instance_id]
