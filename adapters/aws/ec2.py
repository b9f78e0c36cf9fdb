"""EC2: whether an instance exists, launch times, launch template versions. Thin: no decisions; errors translated by
``adapters.aws.calls``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from adapters.aws.calls import call, call_unless_gone
from adapters.aws.ports import Ec2Instance

FILTER_VALUES = 200  # values per DescribeInstances filter
# DescribeInstances' answer for an id EC2 does not know ("Error codes for the Amazon EC2 API").
UNKNOWN_INSTANCE_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


class Ec2:
    """EC2 calls.

    Args:
        client: a boto3 ``ec2`` client (or an ``adapters.aws.clients.LazyClient``).
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def instance_known(self, instance_id: str) -> bool:
        """One DescribeInstances call: False when EC2 does not know the id (NotFound, or no reservation).

        A terminated instance stays known for about an hour after termination.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call_unless_gone(
            "DescribeInstances",
            self.client.describe_instances,
            lambda code, _: code in UNKNOWN_INSTANCE_CODES,
            InstanceIds=[instance_id],
        )
        if out is None:
            return False
        return any(r.get("Instances") for r in out.get("Reservations", []))

    def describe_instance(self, instance_id: str) -> Ec2Instance | None:
        """One DescribeInstances call: the instance's state and purchase option, None when EC2 does not know the id
        (NotFound, Malformed, or no reservation). A terminated instance stays known for about an hour.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        out = call_unless_gone(
            "DescribeInstances",
            self.client.describe_instances,
            lambda code, _: code in UNKNOWN_INSTANCE_CODES,
            InstanceIds=[instance_id],
        )
        if out is None:
            return None
        for reservation in out.get("Reservations", []):
            for inst in reservation.get("Instances", []):
                if inst.get("InstanceId") == instance_id:
                    return _ec2_instance(inst)
        return None

    def launch_times(self, instance_ids: Iterable[str]) -> dict[str, datetime]:
        """EC2 launch time of each instance: DescribeInstances with an ``instance-id`` filter, 200 ids a call,
        following ``NextToken``; unknown ids are simply absent. No call for no ids.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return {
            str(inst["InstanceId"]): inst["LaunchTime"]
            for inst in self._instances(instance_ids)
            if inst.get("LaunchTime") is not None
        }

    def template_versions(self, template_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """DescribeLaunchTemplates: template id -> (default version, latest version), as strings. No call for no ids.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        ids = sorted(set(template_ids))
        if not ids:
            return {}
        out = call("DescribeLaunchTemplates", self.client.describe_launch_templates, LaunchTemplateIds=ids)
        return {
            t["LaunchTemplateId"]: (str(t["DefaultVersionNumber"]), str(t["LatestVersionNumber"]))
            for t in out.get("LaunchTemplates", [])
        }

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Ec2Instance]:
        """State and tags of each instance: DescribeInstances with an ``instance-id`` filter, 200 ids a call,
        following ``NextToken``; ids EC2 does not know are absent (a terminated instance stays known about an hour).
        No call for no ids.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return {str(inst["InstanceId"]): _ec2_instance(inst) for inst in self._instances(instance_ids)}

    def _instances(self, instance_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
        """The ``Reservations[].Instances[]`` entries of the instances named: DescribeInstances with an
        ``instance-id`` filter, ``FILTER_VALUES`` ids a call, following ``NextToken``. No call for no ids."""
        ids = list(dict.fromkeys(instance_ids))
        for start in range(0, len(ids), FILTER_VALUES):
            kwargs: dict[str, Any] = {
                "Filters": [{"Name": "instance-id", "Values": ids[start : start + FILTER_VALUES]}]
            }
            while True:
                out = call("DescribeInstances", self.client.describe_instances, **kwargs)
                for reservation in out.get("Reservations", []):
                    yield from reservation.get("Instances", [])
                token = out.get("NextToken")
                if not token:
                    break
                kwargs["NextToken"] = token

    def terminate(self, instance_ids: Iterable[str]) -> None:
        """EC2 TerminateInstances (idempotent: terminating a terminated instance succeeds). No call for no ids.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        ids = sorted(set(instance_ids))
        if ids:
            call("TerminateInstances", self.client.terminate_instances, InstanceIds=ids)


def _ec2_instance(inst: Mapping[str, Any]) -> Ec2Instance:
    """One ``Reservations[].Instances[]`` entry of DescribeInstances as an ``Ec2Instance``."""
    return Ec2Instance(
        instance_id=str(inst["InstanceId"]),
        state=str((inst.get("State") or {}).get("Name", "")),
        lifecycle=str(inst.get("InstanceLifecycle") or ""),
        tags={str(t["Key"]): str(t.get("Value", "")) for t in inst.get("Tags", [])},
    )
