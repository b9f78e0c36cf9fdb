"""``SimAws``: the simulated AWS account a simulated Lambda or agent acts through. It satisfies
``adapters.aws.ports.AwsPort`` (``.autoscaling``, ``.ec2``, ``.queue``) and carries the physics (``.cloud``) the
fault schedules drive.

See ``sim.cloud`` (Auto Scaling and EC2 behaviour, events), ``sim.autoscaling`` and ``sim.ec2`` (the API rules, after
the EC2 Auto Scaling and EC2 API references) and ``sim.sqs`` (the command queue, after the Amazon SQS Developer
Guide).
"""

from __future__ import annotations

from sim.autoscaling import SimAutoScaling
from sim.aws_common import Emit
from sim.aws_state import InstanceCallback, _nothing
from sim.cloud import Cloud
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

    # the outside world's actions, for the fault schedules
    def interrupt(self, instance_id: str) -> bool:
        """A Spot interruption (warning now, termination in 120 s); see ``Cloud.interrupt``."""
        return self.cloud.interrupt(instance_id)

    def rebalance(self, instance_id: str) -> bool:
        """A rebalance recommendation; see ``Cloud.rebalance``."""
        return self.cloud.rebalance(instance_id)

    def kops_reset(self, group: str, min_size: int, max_size: int, desired: int) -> None:
        """kOps writes the group's sizes back; see ``Cloud.kops_reset``."""
        self.cloud.kops_reset(group, min_size, max_size, desired)

    def capacity_outage(self, target: str | tuple[str, str], start: float, end: float) -> None:
        """No launches in an AZ or pool ``(type, AZ)`` between ``start`` and ``end``."""
        self.cloud.capacity_outage(target, start, end)
