"""Ports: the typed surface of the AWS adapters that the Lambdas' executors and handlers, and the agent, depend on.

Each ``Protocol`` is what one adapter offers (``adapters.aws.autoscaling.AutoScaling``, ``ec2.Ec2``,
``sqs.CommandQueue``, ``events.EventBus``, ``cloudwatch.MetricSink``); an in-memory implementation (a simulation, a
test double) satisfies it without boto3. This module imports no SDK: the deciders' modules may name its types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from core.lifecycle import LifecycleAction
from core.model import Command


@dataclass(frozen=True)
class Membership:
    """An instance's place in Auto Scaling (DescribeAutoScalingInstances).

    Attributes:
        asg_name: its group.
        lifecycle_state: ``InService``, ``Terminating:Wait``, ... (empty when not reported).
    """

    asg_name: str
    lifecycle_state: str


@dataclass(frozen=True)
class Ec2Instance:
    """What DescribeInstances says about one instance (``Reservations[].Instances[]``).

    Attributes:
        instance_id: the instance.
        state: ``State.Name``: ``pending``, ``running``, ``stopping``, ``stopped``, ``shutting-down`` or
            ``terminated``.
        lifecycle: ``InstanceLifecycle``: ``spot``, ``scheduled`` or ``capacity-block``; empty for an On-Demand
            instance, which carries no such field (EC2 API reference, ``Instance``).
        tags: its tags (key -> value).
    """

    instance_id: str
    state: str
    lifecycle: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejection:
    """EventBridge refused the entry (PutEvents answered, with ``FailedEntryCount`` 1)."""

    code: str
    message: str


class GroupReader(Protocol):
    """Auto Scaling look-ups."""

    def cluster_groups(self, cluster: str) -> list[dict[str, Any]]: ...

    def describe_group(self, asg_name: str) -> dict[str, Any] | None: ...

    def membership(self, instance_id: str) -> Membership | None: ...

    def group_names(self, instance_ids: Iterable[str]) -> dict[str, str]: ...


class CapacityWriter(Protocol):
    """Auto Scaling effects on capacity: absolute sizes, termination, early replacement."""

    def set_capacity(self, asg_name: str, desired: int | None, max_size: int | None) -> None: ...

    def terminate_in_group(self, instance_id: str, decrement: bool) -> bool: ...

    def detach_instance(self, instance_id: str, asg_name: str) -> bool: ...


class LifecycleActions(Protocol):
    """Termination lifecycle actions: True when Auto Scaling accepted, False when the action is gone."""

    def complete_lifecycle_action(self, action: LifecycleAction) -> bool: ...

    def record_heartbeat(self, action: LifecycleAction) -> bool: ...


class HookKeeper(Protocol):
    """A group's termination lifecycle hook: read it, create or update it."""

    def lifecycle_hook(self, asg_name: str, hook_name: str) -> dict[str, Any] | None: ...

    def put_termination_hook(self, asg_name: str, hook_name: str, heartbeat_seconds: int) -> None: ...


class AutoScalingPort(GroupReader, CapacityWriter, LifecycleActions, HookKeeper, Protocol):
    """Everything ``adapters.aws.autoscaling.AutoScaling`` offers."""


class Ec2Port(Protocol):
    """EC2 look-ups."""

    def instance_known(self, instance_id: str) -> bool: ...

    def describe_instance(self, instance_id: str) -> Ec2Instance | None: ...

    def launch_times(self, instance_ids: Iterable[str]) -> dict[str, datetime]: ...

    def template_versions(self, template_ids: Iterable[str]) -> dict[str, tuple[str, str]]: ...

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Ec2Instance]: ...

    def terminate(self, instance_ids: Iterable[str]) -> None: ...


class CommandSender(Protocol):
    """Sends a command to the agent; returns the message id."""

    def send_command(self, command: Command) -> str: ...


class CommandReceiver(Protocol):
    """The agent's side of the command queue (``adapters.aws.sqs.CommandQueue``); each call raises
    ``AwsUnavailableError`` / ``AwsRequestError``."""

    def receive(self, max_messages: int, wait_seconds: int, visibility_seconds: int) -> list[dict[str, Any]]: ...

    def delete(self, receipt: str) -> None: ...

    def set_visibility(self, receipt: str, seconds: int) -> None: ...


class AwsPort(Protocol):
    """The AWS adapters a Lambda acts through (``adapters.aws.gateway.AwsGateway``)."""

    @property
    def autoscaling(self) -> AutoScalingPort: ...

    @property
    def ec2(self) -> Ec2Port: ...

    @property
    def queue(self) -> CommandSender: ...


class EventPublisher(Protocol):
    """Puts one event on the bus; None when accepted, else the rejection."""

    def put(self, source: str, detail_type: str, detail: str) -> Rejection | None: ...


class MetricPublisher(Protocol):
    """Puts one metric data point."""

    def put(self, name: str, value: float, unit: str, dimensions: Mapping[str, str]) -> None: ...
