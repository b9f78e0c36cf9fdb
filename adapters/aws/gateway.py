"""``AwsGateway``: the AWS adapters a Lambda acts through (Auto Scaling, EC2, the command queue), built from clients
that are made on first use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.ec2 import Ec2
from adapters.aws.sqs import CommandQueue


@dataclass
class AwsGateway:
    """The Lambdas' AWS adapters.

    Attributes:
        autoscaling: groups, capacity, termination, detach, lifecycle actions.
        ec2: instance look-ups, launch times, launch template versions.
        queue: the agent's command queue.
    """

    autoscaling: AutoScaling
    ec2: Ec2
    queue: CommandQueue

    @classmethod
    def from_clients(cls, autoscaling: Any, ec2: Any, sqs: Any, queue_url: str) -> AwsGateway:
        """Wrap boto3 clients (or ``LazyClient`` stand-ins, so a client is only made when used)."""
        return cls(AutoScaling(autoscaling), Ec2(ec2), CommandQueue(sqs, queue_url))
