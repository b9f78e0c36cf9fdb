"""Auto Scaling answers that moto 5.2 is laxer about than AWS, made strict in-process (FACTS.md, "The local test
world's known gaps"), so a test of what the Lambdas do when AWS refuses means something.

With ``install()`` (the local world's moto server does it when it starts; ``strict_auto_scaling()`` is the same for
one ``with`` block of an in-process ``mock_aws``):

- **TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity=true at MinSize** is refused with
  ``ValidationError`` "Currently, desiredSize equals minSize (<n>). Terminating instance without replacement will
  violate group's min size constraint. ..." (moto lets desired drop below MinSize). Source: the API reference of
  TerminateInstanceInAutoScalingGroup, and AWS's answer as quoted in e.g. hashicorp/nomad-autoscaler#1290.
- **TerminateInstanceInAutoScalingGroup for an id no group holds** answers ``ValidationError`` "Instance Id not found
  - No managed instance found for instance ID <id>" (moto answers HTTP 500: a ``StopIteration`` escapes).
- **DetachInstances with decrement below MinSize** is refused with ``ValidationError`` ("AutoScalingGroup <name> has
  min-size=..., max-size=..., and desired-size=.... To detach <k> instance, please update the AutoScalingGroup sizes
  appropriately."); **an id not in the group** answers "The instance <id> is not part of Auto Scaling group <name>."
- **UpdateAutoScalingGroup / SetDesiredCapacity with a desired capacity outside [MinSize, MaxSize]** (after the
  call's own MinSize/MaxSize) is refused with ``ValidationError`` "Desired capacity:<d> must be between the specified
  min size:<min> and max size:<max>" (moto accepts any value).
- **Per-call limits** (API reference, "Array Members" / "Valid Range"): DescribeAutoScalingGroups ``MaxRecords`` at
  most 100 (moto raises a bare ``ValueError``: HTTP 500); DescribeAutoScalingInstances at most 50 ``InstanceIds``
  and ``MaxRecords`` 50; DetachInstances at most 20 ``InstanceIds``. A request over a limit answers
  ``ValidationError`` "1 validation error detected: Value ... at '<member>' failed to satisfy constraint: ...", the
  form of AWS's query-protocol constraint errors.

moto runs in this process (``ThreadedMotoServer`` or ``mock_aws``), so the rules are patched onto moto's Auto Scaling
backend and response classes; ``uninstall()`` puts moto's own methods back.

One fault too, for a ``with`` block (``terminates_refused()``): **TerminateInstanceInAutoScalingGroup refused with
``ScalingActivityInProgress``** (HTTP 400, "The operation can't be performed because there are scaling activities in
progress."), one of the two errors the API reference documents for that call; AWS does not say when it answers it,
so nothing in moto's model decides it: the block does (the simulation's ``sim.faults.FaultWindow`` on that
operation is its twin, ``tests/unit/sim/aws_contract/test_autoscaling.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.autoscaling.exceptions import AutoscalingClientError, ValidationError
from moto.autoscaling.models import AutoScalingBackend
from moto.autoscaling.responses import AutoScalingResponse

DESCRIBE_GROUPS_MAX_RECORDS = 100
DESCRIBE_INSTANCES_MAX_IDS = 50
DETACH_MAX_IDS = 20
ACTIVE = ("InService", "Pending", "Pending:Wait", "Pending:Proceed", "Standby")

_lock = threading.Lock()
_originals: dict[tuple[type, str], Callable[..., Any]] = {}


def _too_many(member: str, count: int, limit: int) -> ValidationError:
    return ValidationError(
        f"1 validation error detected: Value at '{member}' failed to satisfy constraint: Member must have length "
        f"less than or equal to {limit} (got {count})"
    )


def _out_of_range(member: str, value: int, limit: int) -> ValidationError:
    return ValidationError(
        f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: Member must have "
        f"value less than or equal to {limit}"
    )


def _holder(backend: Any, instance_id: str) -> Any:
    for group in backend.autoscaling_groups.values():
        for state in group.instance_states:
            if state.instance.id == instance_id:
                return group
    return None


def _terminate_instance(original: Callable[..., Any]) -> Callable[..., Any]:
    def terminate_instance(self: Any, instance_id: str, should_decrement: bool) -> Any:
        group = _holder(self, instance_id)
        if group is None:
            raise ValidationError(f"Instance Id not found - No managed instance found for instance ID {instance_id}")
        if should_decrement and int(group.desired_capacity or 0) <= int(group.min_size or 0):
            raise ValidationError(
                f"Currently, desiredSize equals minSize ({group.min_size}). Terminating instance without replacement "
                "will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false "
                "or lower group's min size."
            )
        return original(self, instance_id, should_decrement)

    return terminate_instance


class ScalingActivityInProgressError(AutoscalingClientError):
    """The API reference's ``ScalingActivityInProgress`` (HTTP 400)."""

    code = "ScalingActivityInProgress"
    message = "The operation can't be performed because there are scaling activities in progress."


@contextmanager
def terminates_refused() -> Iterator[None]:
    """While inside: every TerminateInstanceInAutoScalingGroup of moto's Auto Scaling (in this process) answers
    ``ScalingActivityInProgress`` and changes nothing."""

    def refused(self: Any, instance_id: str, should_decrement: bool) -> Any:
        raise ScalingActivityInProgressError()

    with _lock:
        current = AutoScalingBackend.terminate_instance
        AutoScalingBackend.terminate_instance = refused  # type: ignore[method-assign]  # moto's backend, for the block
    try:
        yield
    finally:
        with _lock:
            AutoScalingBackend.terminate_instance = current  # type: ignore[method-assign]


def _detach_instances(original: Callable[..., Any]) -> Callable[..., Any]:
    def detach_instances(self: Any) -> Any:
        group_name = self._get_param("AutoScalingGroupName")
        instance_ids = self._get_param("InstanceIds", []) or []
        should_decrement = self._get_bool_param("ShouldDecrementDesiredCapacity", False)
        if len(instance_ids) > DETACH_MAX_IDS:
            raise _too_many("instanceIds", len(instance_ids), DETACH_MAX_IDS)
        group = self.autoscaling_backend.autoscaling_groups.get(group_name)
        if group is None:
            raise ValidationError(f"AutoScalingGroup name not found - AutoScalingGroup '{group_name}' not found")
        held = {s.instance.id for s in group.instance_states}
        for instance_id in instance_ids:
            if instance_id not in held:
                raise ValidationError(f"The instance {instance_id} is not part of Auto Scaling group {group_name}.")
        desired = int(group.desired_capacity or 0)
        if should_decrement and desired - len(instance_ids) < int(group.min_size or 0):
            raise ValidationError(
                f"AutoScalingGroup {group_name} has min-size={group.min_size}, max-size={group.max_size}, and "
                f"desired-size={desired}. To detach {len(instance_ids)} instance, please update the AutoScalingGroup "
                "sizes appropriately."
            )
        return original(self)

    return detach_instances


def _check_desired(desired: int, min_size: int, max_size: int) -> None:
    if not min_size <= desired <= max_size:
        raise ValidationError(
            f"Desired capacity:{desired} must be between the specified min size:{min_size} and max size:{max_size}"
        )


def _resizes(original: Callable[..., Any]) -> Callable[..., Any]:
    """UpdateAutoScalingGroup and SetDesiredCapacity: the desired capacity asked is within the sizes after the call."""

    def resize(self: Any) -> Any:
        group = self.autoscaling_backend.autoscaling_groups.get(self._get_param("AutoScalingGroupName"))
        desired = self._get_int_param("DesiredCapacity")
        if group is not None and desired is not None:
            min_size = self._get_int_param("MinSize")
            max_size = self._get_int_param("MaxSize")
            _check_desired(
                desired,
                int(group.min_size if min_size is None else min_size),
                int(group.max_size if max_size is None else max_size),
            )
        return original(self)

    return resize


def _describe_instances(original: Callable[..., Any]) -> Callable[..., Any]:
    def describe_auto_scaling_instances(self: Any) -> Any:
        ids = self._get_param("InstanceIds", []) or []
        if len(ids) > DESCRIBE_INSTANCES_MAX_IDS:
            raise _too_many("instanceIds", len(ids), DESCRIBE_INSTANCES_MAX_IDS)
        records = self._get_int_param("MaxRecords")
        if records is not None and records > DESCRIBE_INSTANCES_MAX_IDS:
            raise _out_of_range("maxRecords", records, DESCRIBE_INSTANCES_MAX_IDS)
        return original(self)

    return describe_auto_scaling_instances


def _describe_groups(original: Callable[..., Any]) -> Callable[..., Any]:
    def describe_auto_scaling_groups(self: Any) -> Any:
        records = self._get_int_param("MaxRecords")
        if records is not None and records > DESCRIBE_GROUPS_MAX_RECORDS:
            raise _out_of_range("maxRecords", records, DESCRIBE_GROUPS_MAX_RECORDS)
        return original(self)

    return describe_auto_scaling_groups


_PATCHES: tuple[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]], ...] = (
    (AutoScalingBackend, "terminate_instance", _terminate_instance),
    (AutoScalingResponse, "detach_instances", _detach_instances),
    (AutoScalingResponse, "update_auto_scaling_group", _resizes),
    (AutoScalingResponse, "set_desired_capacity", _resizes),
    (AutoScalingResponse, "describe_auto_scaling_instances", _describe_instances),
    (AutoScalingResponse, "describe_auto_scaling_groups", _describe_groups),
)


def installed() -> bool:
    with _lock:
        return bool(_originals)


def install() -> None:
    """Make moto's Auto Scaling answer as AWS does for the cases above (idempotent, process-wide)."""
    with _lock:
        if _originals:
            return
        for cls, name, wrap in _PATCHES:
            original = getattr(cls, name)
            _originals[(cls, name)] = original
            setattr(cls, name, wrap(original))


def uninstall() -> None:
    """Put moto's own methods back (idempotent)."""
    with _lock:
        for (cls, name), original in _originals.items():
            setattr(cls, name, original)
        _originals.clear()


@contextmanager
def strict_auto_scaling() -> Iterator[None]:
    """``install()`` for the ``with`` block; moto's own behaviour after it (unless it was installed before)."""
    was = installed()
    install()
    try:
        yield
    finally:
        if not was:
            uninstall()
