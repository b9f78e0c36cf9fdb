"""``SimAws``: the simulated AWS account a simulated Lambda or agent acts through. It satisfies
``adapters.aws.ports.AwsPort`` (``.autoscaling``, ``.ec2``, ``.queue``) and carries the physics (``.cloud``) the
fault schedules drive.

See ``sim.cloud`` (Auto Scaling and EC2 behaviour, events), ``sim.autoscaling`` and ``sim.ec2`` (the API rules, after
the EC2 Auto Scaling and EC2 API references) and ``sim.sqs`` (the command queue, after the Amazon SQS Developer
Guide).

Use::

    aws = SimAws(kernel, faults, bus.put, on_running=kube.add_node, on_terminated=kube.remove_node)
    aws.cloud.add_group("nodes-us-east-1a.demo", cluster="demo", instance_group="nodes-us-east-1a",
                        zones=("us-east-1a",), min_size=1, max_size=20, desired=10,
                        hooks=(TerminationHook("node-manager-drain"),))
    aws.start()                      # Auto Scaling's reconcile every 10 s
    deps = ...(aws=aws, ...)         # the Lambdas' AwsPort; the agent's queue is aws.queue
    aws.interrupt(instance_id)       # schedules drive the outside world through these methods
"""

from __future__ import annotations

from adapters.aws.ports import AwsPort, CommandReceiver
from sim.asg_policy import Outage
from sim.autoscaling import SimAutoScaling
from sim.aws_common import Emit
from sim.aws_state import Instance, InstanceCallback, _nothing
from sim.cloud import SPOT_NOTICE_SECONDS, Cloud
from sim.ec2 import SimEc2
from sim.faults import Faults
from sim.kernel import Kernel
from sim.sqs import SimQueue


class SimAws:
    """One account and region.

    Args:
        kernel: the simulation's kernel.
        faults: the run's fault windows (services ``autoscaling``, ``ec2``, ``sqs``).
        emit: receives each event AWS emits (the simulated EventBridge's input).
        on_running, on_terminated: called when an instance starts running / stops running.
        account, region: of the events and ARNs.
    """

    def __init__(
        self,
        kernel: Kernel,
        faults: Faults,
        emit: Emit,
        *,
        on_running: InstanceCallback = _nothing,
        on_terminated: InstanceCallback = _nothing,
        account: str = "123456789012",
        region: str = "us-east-1",
    ) -> None:
        self.kernel = kernel
        self.cloud = Cloud(
            kernel, emit, account=account, region=region, on_running=on_running, on_terminated=on_terminated
        )
        self._autoscaling = SimAutoScaling(self.cloud, faults)
        self._ec2 = SimEc2(self.cloud, faults)
        self._queue = SimQueue(kernel, faults)

    @property
    def autoscaling(self) -> SimAutoScaling:
        return self._autoscaling

    @property
    def ec2(self) -> SimEc2:
        return self._ec2

    @property
    def queue(self) -> SimQueue:
        return self._queue

    def start(self) -> None:
        """Start Auto Scaling's reconcile loop."""
        self.cloud.start()

    # -- for the invariants and the benchmark -------------------------------------------------------------------
    def detached_alive(self) -> list[Instance]:
        """Live instances no group holds (detached, and not terminated yet), in launch order."""
        return [i for i in self.cloud.instances.values() if i.alive and i.group is None]

    def instance_seconds(self) -> float:
        """Instance-seconds run since the simulation began (what EC2 bills), ended and still running."""
        now = self.kernel.t
        return self.cloud.ended_seconds + sum(now - i.started for i in self.cloud.instances.values() if i.alive)

    # -- the outside world's actions, for the fault schedules --------------------------------------------------
    def interrupt(self, instance_id: str, notice: float = SPOT_NOTICE_SECONDS, warn: bool = True) -> bool:
        """EC2 reclaims a running Spot instance ("Spot Instance interruption notices", EC2 User Guide): the warning
        now, termination ``notice`` seconds later; Auto Scaling replaces it at its next health check. Notices are
        "emitted on a best effort basis": ``warn=False`` reclaims without one.

        Returns:
            False (nothing happens) when the instance is not a live Spot instance or has a reclaim announced already.
        """
        inst = self.cloud.instances.get(instance_id)
        if inst is None or not inst.alive or inst.lifecycle != "spot" or inst.reclaim_at is not None:
            return False
        inst.reclaim_at, inst.reclaim_warned = self.kernel.t + notice, self.kernel.t
        if warn:
            self.cloud.events.spot_warning(instance_id, inst.zone)
        self.kernel.after(notice, f"aws:reclaim {instance_id}", lambda: self.cloud.ec2_terminate(instance_id))
        return True

    def rebalance(self, instance_id: str) -> bool:
        """A rebalance recommendation for a live Spot instance ("EC2 instance rebalance recommendations": a signal
        only, nothing else happens). False when the instance is not a live Spot instance."""
        inst = self.cloud.instances.get(instance_id)
        if inst is None or not inst.alive or inst.lifecycle != "spot":
            return False
        self.cloud.events.rebalance(instance_id)
        return True

    def kops_reset(self, group: str, min_size: int, max_size: int, desired: int | None = None) -> None:
        """kOps (``kops update cluster --yes``) writes the instance group's MinSize and MaxSize back; without a
        ``desired``, Auto Scaling keeps the group's desired capacity, clamped into the new sizes (UpdateAutoScalingGroup
        without DesiredCapacity, EC2 Auto Scaling API Reference).

        Raises:
            ValueError: ``desired`` outside ``[min_size, max_size]`` (kOps never writes that).
        """
        if desired is None:
            desired = min(max(self.cloud.groups[group].desired, min_size), max_size)
        if not min_size <= desired <= max_size:
            raise ValueError(f"kops reset of {group}: desired {desired} outside [{min_size}, {max_size}]")
        self.cloud.set_sizes(group, min_size, max_size, desired)

    def capacity_outage(self, target: str | tuple[str, str], start: float, end: float) -> None:
        """No launches in an AZ or a pool ``(instance type, AZ)`` from ``start`` to ``end`` (simulated seconds)."""
        self.cloud.outages.append(Outage(target, start, end))


def as_ports(aws: SimAws) -> tuple[AwsPort, CommandReceiver]:
    """The simulated account as the ports the Lambdas (``AwsPort``) and the agent (``CommandReceiver``) take; the
    type checker proves here that ``SimAws`` satisfies them."""
    return aws, aws.queue
