"""EC2 look-ups: the one ``launch_times`` (filtered, batched, paginated; unknown ids absent), template versions."""

from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws

from adapters.aws.ec2 import FILTER_VALUES, Ec2
from adapters.aws.ports import Ec2Instance

AMI = "ami-0123456789abcdef0"


class Paging:
    """A fake ``describe_instances`` answering in pages of one reservation; records each call's arguments."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.calls: list[dict[str, Any]] = []

    def describe_instances(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        wanted = [i for i in kwargs["Filters"][0]["Values"] if i in self.ids]
        page = int(kwargs.get("NextToken", 0))
        out: dict[str, Any] = {"Reservations": []}
        if page < len(wanted):
            launch = datetime(2024, 1, 1, tzinfo=UTC)
            out["Reservations"] = [{"Instances": [{"InstanceId": wanted[page], "LaunchTime": launch}]}]
            if page + 1 < len(wanted):
                out["NextToken"] = str(page + 1)
        return out


def test_launch_times_follow_pages_and_batch_the_filter() -> None:
    ids = [f"i-{n:017x}" for n in range(FILTER_VALUES + 2)]
    fake = Paging(ids[:3] + ids[-1:])
    times = Ec2(fake).launch_times([*ids, "i-unknown"])
    assert set(times) == set(ids[:3] + ids[-1:])
    assert {len(c["Filters"][0]["Values"]) for c in fake.calls} == {FILTER_VALUES, 3}
    assert Ec2(fake).launch_times([]) == {} and len(fake.calls) == 3 + 1  # 3 pages, then 1; no call for no ids


def test_on_moto(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixture
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        client = boto3.client("ec2", region_name="us-east-1")
        ec2 = Ec2(client)
        instance = client.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        assert set(ec2.launch_times([instance, "i-0fedcba9876543210"])) == {instance}
        assert ec2.instance_known(instance) and not ec2.instance_known("i-0fedcba9876543210")
        template = client.create_launch_template(LaunchTemplateName="kops", LaunchTemplateData={"ImageId": AMI})
        template_id = template["LaunchTemplate"]["LaunchTemplateId"]
        client.create_launch_template_version(LaunchTemplateId=template_id, LaunchTemplateData={"ImageId": AMI})
        assert ec2.template_versions([template_id]) == {template_id: ("1", "2")}
        assert ec2.template_versions([]) == {}


def test_describe_instance_reports_state_and_purchase_option(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixture
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        client = boto3.client("ec2", region_name="us-east-1")
        ec2 = Ec2(client)
        spot = client.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, InstanceMarketOptions={"MarketType": "spot"})[
            "Instances"
        ][0]["InstanceId"]
        on_demand = client.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        client.stop_instances(InstanceIds=[on_demand])
        assert ec2.describe_instance(spot) == Ec2Instance(spot, "running", "spot")
        assert ec2.describe_instance(on_demand) == Ec2Instance(on_demand, "stopped", "")
        assert ec2.describe_instance("i-0fedcba9876543210") is None


def test_describe_and_terminate_on_moto(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixture
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        client = boto3.client("ec2", region_name="us-east-1")
        ec2 = Ec2(client)
        tags = [{"ResourceType": "instance", "Tags": [{"Key": "KubernetesCluster", "Value": "c.k8s.local"}]}]
        instance = client.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, TagSpecifications=tags)["Instances"][0][
            "InstanceId"
        ]
        seen = ec2.describe([instance, "i-0fedcba9876543210"])
        assert set(seen) == {instance}
        assert seen[instance].state == "running" and seen[instance].tags == {"KubernetesCluster": "c.k8s.local"}
        ec2.terminate([instance])
        ec2.terminate([instance])  # idempotent
        ec2.terminate([])  # no call for no ids
        assert ec2.describe([instance])[instance].state in ("shutting-down", "terminated")
        assert ec2.describe([]) == {}
