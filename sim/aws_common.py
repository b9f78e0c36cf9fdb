"""What the in-memory AWS services share: their errors, raised as the real adapters raise them, and the EventBridge
events they emit.

Errors: a refusal or an injected fault is built as the botocore ``ClientError`` the service would answer (code,
message, HTTP status) and translated by ``adapters.aws.calls.translate``, the adapters' own rule, so a simulated
call raises exactly the ``AwsUnavailableError`` (throttling, 5xx) or ``AwsRequestError`` (anything else) the real
adapter raises, ``from`` that ``ClientError``.

Events: the EventBridge envelope (``version``, ``id``, ``detail-type``, ``source``, ``account``, ``time`` in RFC 3339
to the second with ``Z``, ``region``, ``resources``, ``detail``) as "Amazon EventBridge events" (EventBridge User
Guide) documents it, with the details of "Amazon EC2 Auto Scaling event reference" (EC2 Auto Scaling User Guide),
"Spot Instance interruption notices" and "EC2 instance rebalance recommendations" (Amazon EC2 User Guide) and "EC2
Instance State-change Notification"; the fixtures of record are ``tests/events/*.json``.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from botocore.exceptions import ClientError

from adapters.aws.calls import translate
from sim.faults import Faults
from sim.kernel import Kernel

# HTTP status of an injected error code (Common Errors of the EC2 / Auto Scaling / SQS API references).
SERVER_CODES = {
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "InternalError": 500,
    "InternalFailure": 500,
    "InternalServerError": 500,
    "RequestLimitExceeded": 503,
}

Emit = Callable[[dict[str, Any]], None]


def client_error(operation: str, code: str, message: str, status: int = 400) -> ClientError:
    """The botocore error of an AWS error answer (the shape ``adapters.aws.calls.error_of`` reads)."""
    response: Any = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, operation)


def refuse(operation: str, code: str, message: str, status: int = 400) -> NoReturn:
    """Raise what the real adapter raises for this answer: ``AwsRequestError`` (a refusal) or ``AwsUnavailableError``
    (throttling, 5xx), from the ``ClientError``."""
    err = client_error(operation, code, message, status)
    raise translate(operation, err) from err


def check_fault(faults: Faults, service: str, operation: str) -> None:
    """Raise the injected error for this call, if the fault schedule says it fails now."""
    code = faults.check(service, operation)
    if code is not None:
        refuse(operation, code, f"injected {code}", SERVER_CODES.get(code, 400))


def check_lost_answer(faults: Faults, service: str, operation: str) -> None:
    """After a call took effect: raise the injected error if the fault schedule says its answer is lost (the service
    ``<service>:lost-answer``, e.g. ``FaultWindow("autoscaling:lost-answer", "DetachInstances", ...)``): the caller
    sees a failure (a 5xx, a timeout) although AWS did what it asked, as after a read timeout or a 500 answered
    once the work was done. Retries then meet the effect already made."""
    check_fault(faults, f"{service}:lost-answer", operation)


class EventSource:
    """Builds and emits EventBridge events of AWS sources (``aws.ec2``, ``aws.autoscaling``).

    Args:
        kernel: time (the events' ``time``) and the stream ``aws:event-ids`` for ids.
        emit: where each event goes (the simulated EventBridge).
        account, region: the envelope's account and region.
    """

    def __init__(self, kernel: Kernel, emit: Emit, account: str, region: str) -> None:
        self.kernel = kernel
        self.emit = emit
        self.account = account
        self.region = region
        self._ids = kernel.stream("aws:event-ids")
        self.sent = 0

    def uuid(self, rng: random.Random | None = None) -> str:
        """A version-4 UUID drawn from ``rng`` (default the event-id stream)."""
        return str(uuid.UUID(int=(rng or self._ids).getrandbits(128), version=4))

    def stamp(self) -> str:
        """The simulated time as EventBridge writes it: ``yyyy-mm-ddThh:mm:ssZ``."""
        return self.kernel.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def send(self, source: str, detail_type: str, resources: list[str], detail: Mapping[str, Any]) -> dict[str, Any]:
        """Emit one event; returns it."""
        event = {
            "version": "0",
            "id": self.uuid(),
            "detail-type": detail_type,
            "source": source,
            "account": self.account,
            "time": self.stamp(),
            "region": self.region,
            "resources": resources,
            "detail": dict(detail),
        }
        self.sent += 1
        self.emit(event)
        return event

    # -- resource names --------------------------------------------------------------------------------------
    def instance_arn(self, instance_id: str) -> str:
        return f"arn:aws:ec2:{self.region}:{self.account}:instance/{instance_id}"

    def group_arn(self, group_id: str, name: str) -> str:
        return (
            f"arn:aws:autoscaling:{self.region}:{self.account}:autoScalingGroup:{group_id}:autoScalingGroupName/{name}"
        )

    # -- EC2 -------------------------------------------------------------------------------------------------
    def spot_warning(self, instance_id: str, zone: str, action: str = "terminate") -> dict[str, Any]:
        """ "EC2 Spot Instance Interruption Warning"; its resource ARN names the AZ and no account, as AWS documents."""
        return self.send(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            [f"arn:aws:ec2:{zone}:instance/{instance_id}"],
            {"instance-id": instance_id, "instance-action": action},
        )

    def rebalance(self, instance_id: str) -> dict[str, Any]:
        """ "EC2 Instance Rebalance Recommendation"."""
        return self.send(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            [self.instance_arn(instance_id)],
            {"instance-id": instance_id},
        )

    def state_change(self, instance_id: str, state: str) -> dict[str, Any]:
        """ "EC2 Instance State-change Notification"."""
        return self.send(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            [self.instance_arn(instance_id)],
            {"instance-id": instance_id, "state": state},
        )

    # -- Auto Scaling ----------------------------------------------------------------------------------------
    def lifecycle_action(
        self, group_id: str, group: str, instance_id: str, hook: str, token: str, metadata: str = ""
    ) -> dict[str, Any]:
        """ "EC2 Instance-terminate Lifecycle Action"."""
        return self.send(
            "aws.autoscaling",
            "EC2 Instance-terminate Lifecycle Action",
            [self.group_arn(group_id, group)],
            {
                "LifecycleActionToken": token,
                "AutoScalingGroupName": group,
                "LifecycleHookName": hook,
                "EC2InstanceId": instance_id,
                "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                "NotificationMetadata": metadata,
                "Origin": "AutoScalingGroup",
                "Destination": "EC2",
            },
        )

    def launch(
        self,
        group_id: str,
        group: str,
        zone: str,
        instance_id: str,
        capacity: tuple[int, int],
        status_message: str | None = None,
    ) -> dict[str, Any]:
        """ "EC2 Instance Launch Successful" (``status_message`` None) or "EC2 Instance Launch Unsuccessful".

        Args:
            capacity: (from, to) of the activity's Cause, "increasing the capacity from 2 to 3".
        """
        activity = self.uuid()
        stamp = self.kernel.now().strftime("%Y-%m-%dT%H:%M:%S")
        detail: dict[str, Any] = {
            "StatusCode": "InProgress" if status_message is None else "Failed",
            "AutoScalingGroupName": group,
            "ActivityId": activity,
            "Details": {"Availability Zone": zone, "Subnet ID": f"subnet-{zone}"},
            "RequestId": activity,
            "EndTime": f"{stamp}.000Z",
            "EC2InstanceId": instance_id,
            "StartTime": f"{stamp}.000Z",
            "Cause": (
                f"At {stamp}Z an instance was started in response to a difference between desired and actual "
                f"capacity, increasing the capacity from {capacity[0]} to {capacity[1]}."
            ),
            "Origin": "EC2",
            "Destination": "AutoScalingGroup",
        }
        resources = [self.group_arn(group_id, group)]
        if status_message is None:
            resources.append(self.instance_arn(instance_id))
            return self.send("aws.autoscaling", "EC2 Instance Launch Successful", resources, detail)
        detail["StatusMessage"] = status_message
        return self.send("aws.autoscaling", "EC2 Instance Launch Unsuccessful", resources, detail)
