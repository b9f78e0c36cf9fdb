"""In-memory EC2 behind ``adapters.aws.ports.Ec2Port``: the answers ``adapters.aws.ec2.Ec2`` gives and the
exceptions it raises.

EC2 API Reference: DescribeInstances by ``InstanceIds`` answers ``InvalidInstanceID.Malformed`` for an id that is not
one and ``InvalidInstanceID.NotFound`` for an unknown one (the adapter's "not known"); with an ``instance-id`` filter
unknown ids are simply absent (200 values a call: one call per 200 ids); a terminated instance stays visible for
about an hour. TerminateInstances answers ``InvalidInstanceID.NotFound`` when any id is unknown (nothing is
terminated) and succeeds for an instance already terminated. DescribeLaunchTemplates answers
``InvalidLaunchTemplateId.NotFound`` when an id is unknown.

Each call first asks ``faults.check("ec2", <operation>)``; TerminateInstances, once done, asks
``faults.check("ec2:lost-answer", ...)`` (``sim.aws_common.check_lost_answer``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from adapters.aws.ec2 import FILTER_VALUES
from adapters.aws.ports import Ec2Instance
from core.model import INSTANCE_ID_RE
from sim.aws_common import check_fault, check_lost_answer, refuse
from sim.aws_state import Instance
from sim.cloud import Cloud
from sim.faults import Faults


def _view(inst: Instance) -> Ec2Instance:
    return Ec2Instance(inst.instance_id, inst.state, inst.lifecycle, dict(inst.tags))


class SimEc2:
    """The EC2 port over a ``Cloud``.

    Args:
        cloud: the simulated account.
        faults: the run's fault windows (service ``ec2``).
    """

    def __init__(self, cloud: Cloud, faults: Faults) -> None:
        self.cloud = cloud
        self.faults = faults
        self.calls: dict[str, int] = {}

    def _call(self, operation: str) -> None:
        self.calls[operation] = self.calls.get(operation, 0) + 1
        check_fault(self.faults, "ec2", operation)

    def _filtered(self, instance_ids: Iterable[str]) -> list[Instance]:
        """DescribeInstances with an ``instance-id`` filter: one call per 200 ids, none for none."""
        ids = list(dict.fromkeys(instance_ids))
        found: list[Instance] = []
        for start in range(0, len(ids), FILTER_VALUES):
            self._call("DescribeInstances")
            for instance_id in ids[start : start + FILTER_VALUES]:
                inst = self.cloud.instances.get(instance_id)
                if inst is not None:
                    found.append(inst)
        return found

    def instance_known(self, instance_id: str) -> bool:
        """False when EC2 does not know the id (a terminated instance is known for about an hour).

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return self.describe_instance(instance_id) is not None

    def describe_instance(self, instance_id: str) -> Ec2Instance | None:
        """The instance's state, purchase option and tags; None when EC2 does not know the id.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        self._call("DescribeInstances")
        inst = self.cloud.instances.get(instance_id) if INSTANCE_ID_RE.fullmatch(instance_id) else None
        return None if inst is None else _view(inst)

    def launch_times(self, instance_ids: Iterable[str]) -> dict[str, datetime]:
        """Launch time of each known instance (aware UTC).

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return {inst.instance_id: inst.launch_time for inst in self._filtered(instance_ids)}

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Ec2Instance]:
        """State and tags of each known instance.

        Raises:
            AwsUnavailableError, AwsRequestError.
        """
        return {inst.instance_id: _view(inst) for inst in self._filtered(instance_ids)}

    def template_versions(self, template_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Template id -> (default version, latest version) as strings. No call for no ids.

        Raises:
            AwsUnavailableError; AwsRequestError ``InvalidLaunchTemplateId.NotFound`` for an unknown id.
        """
        ids = sorted(set(template_ids))
        if not ids:
            return {}
        operation = "DescribeLaunchTemplates"
        self._call(operation)
        unknown = [t for t in ids if t not in self.cloud.templates]
        if unknown:
            refuse(
                operation,
                "InvalidLaunchTemplateId.NotFound",
                "At least one of the launch templates specified in the request does not exist.",
            )
        return {
            t: (str(self.cloud.templates[t].default_version), str(self.cloud.templates[t].latest_version)) for t in ids
        }

    def terminate(self, instance_ids: Iterable[str]) -> None:
        """TerminateInstances (idempotent for terminated instances). No call for no ids.

        Raises:
            AwsUnavailableError; AwsRequestError ``InvalidInstanceID.Malformed`` / ``InvalidInstanceID.NotFound``
            (then nothing is terminated).
        """
        ids = sorted(set(instance_ids))
        if not ids:
            return
        operation = "TerminateInstances"
        self._call(operation)
        malformed = [i for i in ids if not INSTANCE_ID_RE.fullmatch(i)]
        if malformed:
            refuse(operation, "InvalidInstanceID.Malformed", f'Invalid id: "{malformed[0]}"')
        unknown = [i for i in ids if i not in self.cloud.instances]
        if unknown:
            refuse(operation, "InvalidInstanceID.NotFound", f"The instance IDs '{', '.join(unknown)}' do not exist")
        for instance_id in ids:
            self.cloud.ec2_terminate(instance_id)
        check_lost_answer(self.faults, "ec2", operation)
