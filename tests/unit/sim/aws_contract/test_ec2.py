"""EC2 on both sides: instances as DescribeInstances shows them, launch template versions, TerminateInstances."""

from __future__ import annotations

from tests.unit.sim.aws_contract.sides import CLUSTER, GROUP, UNKNOWN, Side, outcome


def test_instances_as_ec2_describes_them(side: Side):
    first, second = side.instances()
    seen = side.aws.ec2.describe_instance(first)
    assert (seen.instance_id, seen.state, seen.lifecycle) == (first, "running", "")
    assert seen.tags["KubernetesCluster"] == CLUSTER
    assert seen.tags["aws:autoscaling:groupName"] == GROUP
    assert seen.tags["aws:ec2launchtemplate:version"] == "1"
    assert side.aws.ec2.instance_known(first) is True
    assert side.aws.ec2.instance_known(UNKNOWN) is False
    assert side.aws.ec2.instance_known("not-an-id") is False
    assert side.aws.ec2.describe_instance(UNKNOWN) is None
    assert set(side.aws.ec2.describe([first, UNKNOWN, second])) == {first, second}
    times = side.aws.ec2.launch_times([first, UNKNOWN])
    assert set(times) == {first} and times[first].tzinfo is not None
    assert side.aws.ec2.launch_times([]) == {}


def test_launch_template_versions(side: Side):
    assert side.aws.ec2.template_versions([side.template_id]) == {side.template_id: ("1", "1")}
    side.new_template_version()
    assert side.aws.ec2.template_versions([side.template_id]) == {side.template_id: ("1", "2")}
    assert side.aws.ec2.template_versions([]) == {}


def test_ec2_terminate(side: Side):
    first, _ = side.instances()
    assert outcome(lambda: side.aws.ec2.terminate([first, UNKNOWN])) == (
        "AwsRequestError",
        "InvalidInstanceID.NotFound",
    )
    assert side.aws.ec2.describe_instance(first).state == "running"  # nothing terminated
    side.aws.ec2.terminate([first])
    side.aws.ec2.terminate([first])  # idempotent
    assert side.aws.ec2.describe_instance(first).state in ("shutting-down", "terminated")
