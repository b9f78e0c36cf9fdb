"""moto's groups launch Spot Instances where a MixedInstancesPolicy asks for no On-Demand capacity, as AWS does
(``localworld.spot_market``); other groups' instances stay On-Demand."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from localworld import spot_market

AMI = "ami-0123456789abcdef0"


def _group(autoscaling, subnet: str, name: str, on_demand_percent: int | None) -> list[str]:  # type: ignore[no-untyped-def]  # boto3 client
    kwargs = {
        "AutoScalingGroupName": name,
        "MinSize": 2,
        "MaxSize": 2,
        "DesiredCapacity": 2,
        "VPCZoneIdentifier": subnet,
    }
    template = {"LaunchTemplateName": "kops", "Version": "$Latest"}
    if on_demand_percent is None:
        kwargs["LaunchTemplate"] = template
    else:
        kwargs["MixedInstancesPolicy"] = {
            "LaunchTemplate": {"LaunchTemplateSpecification": template, "Overrides": [{"InstanceType": "m5.large"}]},
            "InstancesDistribution": {
                "OnDemandBaseCapacity": 0,
                "OnDemandPercentageAboveBaseCapacity": on_demand_percent,
            },
        }
    autoscaling.create_auto_scaling_group(**kwargs)
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
    return [i["InstanceId"] for i in group["Instances"]]


def test_all_spot_groups_launch_spot_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    spot_market.install()
    spot_market.install()  # idempotent
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        autoscaling = boto3.client("autoscaling", region_name="us-east-1")
        ec2.create_launch_template(LaunchTemplateName="kops", LaunchTemplateData={"ImageId": AMI})
        subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
        groups = {
            "spot": _group(autoscaling, subnet, "spot", 0),
            "mixed": _group(autoscaling, subnet, "mixed", 50),
            "plain": _group(autoscaling, subnet, "plain", None),
        }
        described = ec2.describe_instances()["Reservations"]
        market = {i["InstanceId"]: i.get("InstanceLifecycle", "") for r in described for i in r["Instances"]}
        assert {market[i] for i in groups["spot"]} == {"spot"}
        assert {market[i] for i in groups["mixed"] + groups["plain"]} == {""}
        spot_market.set_market(groups["spot"][:1], None)
        described = ec2.describe_instances(InstanceIds=groups["spot"][:1])["Reservations"][0]["Instances"][0]
        assert "InstanceLifecycle" not in described
