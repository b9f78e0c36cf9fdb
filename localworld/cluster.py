"""A kOps cluster's AWS side in moto, shaped as kOps creates it, plus the project's own AWS resources.

kOps (https://kops.sigs.k8s.io/) makes one ASG per instance group: ``master-<az>.masters.<cluster>`` for each
control-plane AZ and, here, ``nodes-<az>.<cluster>`` per worker AZ, and tags each ASG (propagated to its instances)
with ``KubernetesCluster``, ``k8s.io/role/...`` and ``kops.k8s.io/instancegroup``. The project's resources mirror
the CDK stack: the state table and the Powertools idempotency table (``core/schema.py``), the SQS command queue with a
dead-letter queue, and an EventBridge rule sending the agent's custom events to an "observer" queue tests read.

moto notes: MixedInstancesPolicy is stored and its launch template used, but moto marks no group instance
``InstanceLifecycle=spot``: ``localworld.spot_market`` (installed when the world's moto server starts) marks those
of an all-Spot group, as AWS launches them; lifecycle hooks are inert.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core import schema
from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS, NODE_ROLE_TAG
from localworld.eventbus import DEFAULT_ACCOUNT

AGENT_EVENT_SOURCE = "node-manager.agent"
DEFAULT_AZS = ("us-east-1a", "us-east-1b", "us-east-1c")
IMAGE_ID = "ami-12c6146b"  # one of moto's built-in AMIs
MASTER_INSTANCE_TYPE = "t3.medium"
WORKER_INSTANCE_TYPES = ("m5.large", "m5a.large", "m4.large")


@dataclass(frozen=True)
class ClusterInfo:
    """What ``create_kops_cluster`` made.

    Attributes:
        master_asgs: AZ -> control-plane ASG name (``master-<az>.masters.<cluster>``).
        worker_asgs: AZ -> worker ASG name (``nodes-<az>.<cluster>``).
        subnets: AZ -> subnet id.
        launch_templates: ASG name -> launch template name.
    """

    name: str
    region: str
    azs: tuple[str, ...]
    vpc_id: str
    subnets: dict[str, str]
    table_name: str
    idempotency_table_name: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    observer_queue_url: str
    master_asgs: dict[str, str]
    worker_asgs: dict[str, str]
    launch_templates: dict[str, str] = field(default_factory=dict)
    event_bus_name: str = "default"
    observer_rule_name: str = "node-manager-observer"

    def env(self) -> dict[str, str]:
        """The settings' environment variables (names from ``core/settings/``) for this cluster."""
        return {
            "CLUSTER_NAME": self.name,
            "TABLE_NAME": self.table_name,
            "QUEUE_URL": self.queue_url,
            "IDEMPOTENCY_TABLE_NAME": self.idempotency_table_name,
            "EVENT_BUS_NAME": self.event_bus_name,
            # the Lambdas run in moto's account (outside Lambda no context names it; lambdas.events.scope)
            "ACCOUNT_ID": DEFAULT_ACCOUNT,
        }

    @property
    def all_asgs(self) -> list[str]:
        return [*self.master_asgs.values(), *self.worker_asgs.values()]


def _client_getter(session_or_clients: Any) -> Callable[[str], Any]:
    """``session.client`` for a boto3/World session, or a lookup in a ``{"ec2": client, ...}`` mapping."""
    if isinstance(session_or_clients, Mapping):
        return lambda name: session_or_clients[name]
    return lambda name: session_or_clients.client(name)


def _asg_tags(asg: str, tags: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {"ResourceId": asg, "ResourceType": "auto-scaling-group", "Key": k, "Value": v, "PropagateAtLaunch": True}
        for k, v in tags.items()
    ]


def master_asg_name(az: str, cluster: str) -> str:
    return f"master-{az}.masters.{cluster}"


def worker_asg_name(az: str, cluster: str) -> str:
    return f"nodes-{az}.{cluster}"


def create_kops_cluster(
    session_or_clients: Any,
    name: str = "demo.k8s.local",
    azs: Iterable[str] = DEFAULT_AZS,
    nodes_per_az: int = 3,
    spot: bool = True,
    *,
    region: str = "us-east-1",
    table_name: str = "node-manager-state",
    idempotency_table_name: str = "node-manager-idempotency",
    queue_name: str = "node-manager-commands",
    visibility_timeout_seconds: int = 30,
) -> ClusterInfo:
    """Create the kOps cluster's VPC, subnets, launch templates and ASGs, and the project's tables and queues.

    Args:
        session_or_clients: something with ``.client(name)`` (``localworld.aws.WorldSession``, ``boto3.Session``
            with an endpoint configured) or a mapping ``{"ec2", "autoscaling", "dynamodb", "sqs", "events"}`` ->
            client.
        nodes_per_az: workers per AZ (each worker ASG: min = desired = nodes_per_az, max = 2 * nodes_per_az).
        spot: workers use a MixedInstancesPolicy with OnDemandPercentageAboveBaseCapacity=0 (all Spot), as a kOps
            instance group with ``spec.mixedInstancesPolicy`` does; otherwise a plain launch template.

    Returns:
        ``ClusterInfo``. Instances are launched by moto when each ASG is created (tags propagated).
    """
    client = _client_getter(session_or_clients)
    ec2, autoscaling = client("ec2"), client("autoscaling")
    azs = tuple(azs)

    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.create_tags(Resources=[vpc_id], Tags=[{"Key": CLUSTER_TAG, "Value": name}, {"Key": "Name", "Value": name}])
    subnets: dict[str, str] = {}
    for i, az in enumerate(azs):
        subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock=f"10.0.{32 * i}.0/19", AvailabilityZone=az)
        subnets[az] = subnet["Subnet"]["SubnetId"]
        ec2.create_tags(
            Resources=[subnets[az]],
            Tags=[{"Key": CLUSTER_TAG, "Value": name}, {"Key": "SubnetType", "Value": "Private"}],
        )

    master_asgs: dict[str, str] = {}
    worker_asgs: dict[str, str] = {}
    templates: dict[str, str] = {}
    for az in azs:
        asg = master_asg_name(az, name)
        lt = f"master-{az}.masters.{name}"
        ec2.create_launch_template(
            LaunchTemplateName=lt,
            LaunchTemplateData={"ImageId": IMAGE_ID, "InstanceType": MASTER_INSTANCE_TYPE},
        )
        tags = {
            CLUSTER_TAG: name,
            **dict.fromkeys(MASTER_ROLE_TAGS, "1"),
            INSTANCE_GROUP_TAG: f"master-{az}",
            "Name": asg,
        }
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=asg,
            MinSize=1,
            MaxSize=1,
            DesiredCapacity=1,
            LaunchTemplate={"LaunchTemplateName": lt, "Version": "$Latest"},
            VPCZoneIdentifier=subnets[az],
            Tags=_asg_tags(asg, tags),
        )
        master_asgs[az] = asg
        templates[asg] = lt

    for az in azs:
        asg = worker_asg_name(az, name)
        lt = f"nodes-{az}.{name}"
        data: dict[str, Any] = {"ImageId": IMAGE_ID, "InstanceType": WORKER_INSTANCE_TYPES[0]}
        ec2.create_launch_template(LaunchTemplateName=lt, LaunchTemplateData=data)
        tags = {CLUSTER_TAG: name, NODE_ROLE_TAG: "1", INSTANCE_GROUP_TAG: f"nodes-{az}", "Name": asg}
        kwargs: dict[str, Any] = {
            "AutoScalingGroupName": asg,
            "MinSize": nodes_per_az,
            "MaxSize": nodes_per_az * 2,
            "DesiredCapacity": nodes_per_az,
            "VPCZoneIdentifier": subnets[az],
            "Tags": _asg_tags(asg, tags),
        }
        if spot:
            kwargs["MixedInstancesPolicy"] = {
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": lt, "Version": "$Latest"},
                    "Overrides": [{"InstanceType": t} for t in WORKER_INSTANCE_TYPES],
                },
                "InstancesDistribution": {
                    "OnDemandBaseCapacity": 0,
                    "OnDemandPercentageAboveBaseCapacity": 0,
                    "SpotAllocationStrategy": "price-capacity-optimized",
                },
            }
        else:
            kwargs["LaunchTemplate"] = {"LaunchTemplateName": lt, "Version": "$Latest"}
        autoscaling.create_auto_scaling_group(**kwargs)
        worker_asgs[az] = asg
        templates[asg] = lt

    dynamodb = client("dynamodb")
    dynamodb.create_table(**schema.state_table(table_name))
    dynamodb.create_table(**schema.idempotency_table(idempotency_table_name))
    for table in (table_name, idempotency_table_name):
        dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    dynamodb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": schema.TTL_ATTRIBUTE}
    )
    dynamodb.update_time_to_live(
        TableName=idempotency_table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
    )

    sqs = client("sqs")
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName=queue_name,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout_seconds),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    observer_url = sqs.create_queue(QueueName="node-manager-observer")["QueueUrl"]
    observer_arn = sqs.get_queue_attributes(QueueUrl=observer_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]

    events = client("events")
    rule = "node-manager-observer"
    events.put_rule(
        Name=rule, EventBusName="default", EventPattern=json.dumps({"source": [AGENT_EVENT_SOURCE]}), State="ENABLED"
    )
    events.put_targets(Rule=rule, EventBusName="default", Targets=[{"Id": "observer", "Arn": observer_arn}])

    return ClusterInfo(
        name=name,
        region=region,
        azs=azs,
        vpc_id=vpc_id,
        subnets=subnets,
        table_name=table_name,
        idempotency_table_name=idempotency_table_name,
        queue_url=queue_url,
        queue_arn=queue_arn,
        dlq_url=dlq_url,
        observer_queue_url=observer_url,
        master_asgs=master_asgs,
        worker_asgs=worker_asgs,
        launch_templates=templates,
        observer_rule_name=rule,
    )


def create_foreign_asg(
    session_or_clients: Any,
    info: ClusterInfo,
    *,
    cluster: str = "foreign.k8s.local",
    az: str | None = None,
    size: int = 1,
    role: str = "node",
) -> str:
    """An ASG of another kOps cluster (tagged ``KubernetesCluster=<cluster>``) in ``info``'s VPC. Returns its name."""
    client = _client_getter(session_or_clients)
    az = az or info.azs[0]
    name = f"nodes-{az}.{cluster}" if role == "node" else master_asg_name(az, cluster)
    lt = f"lt-{name}"
    client("ec2").create_launch_template(
        LaunchTemplateName=lt, LaunchTemplateData={"ImageId": IMAGE_ID, "InstanceType": WORKER_INSTANCE_TYPES[0]}
    )
    role_tags = {NODE_ROLE_TAG: "1"} if role == "node" else dict.fromkeys(MASTER_ROLE_TAGS, "1")
    group = f"nodes-{az}" if role == "node" else f"master-{az}"
    client("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=size,
        MaxSize=size * 2,
        DesiredCapacity=size,
        LaunchTemplate={"LaunchTemplateName": lt, "Version": "$Latest"},
        VPCZoneIdentifier=info.subnets[az],
        Tags=_asg_tags(name, {CLUSTER_TAG: cluster, **role_tags, INSTANCE_GROUP_TAG: group}),
    )
    return name


def launch_untagged_instance(session_or_clients: Any, info: ClusterInfo, az: str | None = None) -> str:
    """One instance with no tags and no ASG in ``info``'s VPC (not the cluster's). Returns its instance id."""
    client = _client_getter(session_or_clients)
    az = az or info.azs[0]
    resp = client("ec2").run_instances(
        ImageId=IMAGE_ID, InstanceType=WORKER_INSTANCE_TYPES[0], MinCount=1, MaxCount=1, SubnetId=info.subnets[az]
    )
    return str(resp["Instances"][0]["InstanceId"])


def cluster_instances(ec2: Any, cluster: str, states: Iterable[str] = ("pending", "running")) -> list[dict[str, Any]]:
    """The cluster's instances (``describe_instances`` filtered on the ``KubernetesCluster`` tag and states)."""
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
    )
    return [inst for page in pages for res in page["Reservations"] for inst in res["Instances"]]
