"""IAM statements that no single resource of the stack owns.

Each kind of statement is its own ``iam.Policy`` attached to the role, so a cdk-nag acknowledgement of a wildcard
covers that policy alone and never hides a wildcard added elsewhere on the role.

- Describe calls that IAM cannot scope to a resource: resource ``*``, nothing else in the statement
  (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2autoscaling.html and
  .../list_amazonec2.html: DescribeAutoScalingInstances, DescribeAutoScalingGroups, DescribeInstances list no
  resource types).
- Mutating Auto Scaling calls: only on groups tagged ``KubernetesCluster=<cluster>`` (``core.kops.CLUSTER_TAG``,
  the tag kOps puts on every group of a cluster), through the ``autoscaling:ResourceTag/<key>`` condition key.
- ``events:PutEvents`` on the account's default event bus only.
- A guard on what the capacity Lambdas may set with UpdateAutoScalingGroup (bounded replay, DESIGN.md invariant 9),
  with the condition keys the Service Authorization Reference lists for that action (FACTS.md): Deny when the
  request sets ``autoscaling:MaxSize`` above ``max_group_size``; Deny when it names a launch template
  (``autoscaling:LaunchTemplateVersionSpecified`` present), subnets (``autoscaling:VPCZoneIdentifiers``), instance
  types (``autoscaling:InstanceTypes``) or a MinSize (``autoscaling:MinSize``): kOps owns those. IAM has no key for
  DesiredCapacity; Auto Scaling refuses a desired capacity above MaxSize, so the MaxSize cap bounds it too.
- ``ec2:TerminateInstances`` only on instances tagged ``KubernetesCluster=<cluster>`` (``ec2:ResourceTag/<key>``):
  the replenisher terminates instances detached for early replacement that were left running.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from core.kops import CLUSTER_TAG
from infra.nag import acknowledge

CLUSTER_TAG_CONDITION_KEY = f"autoscaling:ResourceTag/{CLUSTER_TAG}"
EC2_CLUSTER_TAG_CONDITION_KEY = f"ec2:ResourceTag/{CLUSTER_TAG}"
MAX_SIZE_CONDITION_KEY = "autoscaling:MaxSize"
# Fields of a group the Lambdas never change (kOps owns them): a request that carries one is denied.
GUARDED_GROUP_KEYS = {
    "LaunchTemplate": "autoscaling:LaunchTemplateVersionSpecified",
    "Subnets": "autoscaling:VPCZoneIdentifiers",
    "InstanceTypes": "autoscaling:InstanceTypes",
    "MinSize": "autoscaling:MinSize",
}


def attach_unscoped_describe(
    scope: Construct, construct_id: str, role: iam.IRole, actions: Sequence[str]
) -> iam.Policy:
    """Allow read-only ``actions`` that support no resource-level permissions, on ``*``.

    Raises:
        ValueError: an action is not a Describe/List/Get call (a mutating call must never get ``*``).
    """
    verbs = [action.split(":", 1)[1] for action in actions]
    if not actions or any(not verb.startswith(("Describe", "List", "Get")) for verb in verbs):
        raise ValueError(f"only read-only calls may be allowed on every resource, got {list(actions)}")
    policy = iam.Policy(
        scope,
        construct_id,
        roles=[role],
        statements=[
            iam.PolicyStatement(sid="DescribeWithoutResourceScope", actions=sorted(actions), resources=["*"]),
        ],
    )
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        f"{', '.join(sorted(actions))} support no resource-level permissions (IAM Service Authorization "
        "Reference), so '*' is the only possible resource; they only read.",
    )
    return policy


def auto_scaling_group_arn_pattern() -> str:
    """``arn:<partition>:autoscaling:<region>:<account>:autoScalingGroup:*:autoScalingGroupName/*``.

    Built from the pseudo parameters even in a stack with a concrete account and region, so the ARN (and the
    cdk-nag finding that names it) is the same in every environment.
    """
    return f"arn:{Aws.PARTITION}:autoscaling:{Aws.REGION}:{Aws.ACCOUNT_ID}:autoScalingGroup:*:autoScalingGroupName/*"


def attach_cluster_group_actions(
    scope: Construct, construct_id: str, role: iam.IRole, *, cluster_name: str, actions: Sequence[str]
) -> iam.Policy:
    """Allow Auto Scaling ``actions`` only on the groups tagged ``KubernetesCluster=<cluster_name>``.

    The group names are not known at deploy time (kOps creates them), so the resource is every group of this
    account and region, and the tag condition does the scoping.

    Raises:
        ValueError: an action is not an ``autoscaling:`` action (other services have other condition keys).
    """
    if not actions or any(not action.startswith("autoscaling:") for action in actions):
        raise ValueError(f"only autoscaling: actions can be scoped by {CLUSTER_TAG_CONDITION_KEY}")
    arn_pattern = auto_scaling_group_arn_pattern()
    policy = iam.Policy(
        scope,
        construct_id,
        roles=[role],
        statements=[
            iam.PolicyStatement(
                sid="OnlyThisClustersGroups",
                actions=sorted(actions),
                resources=[arn_pattern],
                conditions={"StringEquals": {CLUSTER_TAG_CONDITION_KEY: cluster_name}},
            ),
        ],
    )
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:"
        "autoScalingGroup:*:autoScalingGroupName/*]",
        f"kOps names the groups, so they cannot be listed here; the statement is limited to groups tagged "
        f"{CLUSTER_TAG}={cluster_name} by the {CLUSTER_TAG_CONDITION_KEY} condition.",
    )
    return policy


def attach_put_default_bus_events(
    scope: Construct, construct_id: str, role: iam.IRole, source: str | None = None
) -> iam.Policy:
    """Allow ``events:PutEvents`` on this account's default event bus (``event-bus/default``); with ``source``, only
    entries with that ``Source`` (the ``events:source`` condition key, Service Authorization Reference, Amazon
    EventBridge), so the role cannot impersonate another producer (the Lambdas' rules match on the source)."""
    bus_arn = Stack.of(scope).format_arn(service="events", resource="event-bus", resource_name="default")
    conditions = {"StringEquals": {"events:source": source}} if source is not None else None
    return iam.Policy(
        scope,
        construct_id,
        roles=[role],
        statements=[
            iam.PolicyStatement(
                sid="PutEventsOnDefaultBus", actions=["events:PutEvents"], resources=[bus_arn], conditions=conditions
            ),
        ],
    )


def attach_group_guard(scope: Construct, construct_id: str, role: iam.IRole, *, max_group_size: int) -> iam.Policy:
    """Deny UpdateAutoScalingGroup requests that set MaxSize above ``max_group_size`` or carry a field kOps owns
    (see the module docstring). Deny statements: whatever another policy of the role allows, these win.

    Raises:
        ValueError: ``max_group_size`` below 1.
    """
    if max_group_size < 1:
        raise ValueError(f"max_group_size must be at least 1, got {max_group_size}")
    statements = [
        iam.PolicyStatement(
            sid="MaxSizeCapped",
            effect=iam.Effect.DENY,
            actions=["autoscaling:UpdateAutoScalingGroup"],
            resources=["*"],
            conditions={"NumericGreaterThan": {MAX_SIZE_CONDITION_KEY: str(max_group_size)}},
        )
    ]
    for field, key in GUARDED_GROUP_KEYS.items():
        statements.append(
            iam.PolicyStatement(
                sid=f"No{field}Change",
                effect=iam.Effect.DENY,
                actions=["autoscaling:UpdateAutoScalingGroup"],
                resources=["*"],
                conditions={"Null": {key: "false"}},  # the key is present: the request sets the field
            )
        )
    return iam.Policy(scope, construct_id, roles=[role], statements=statements)


def attach_cluster_instance_terminate(
    scope: Construct, construct_id: str, role: iam.IRole, *, cluster_name: str
) -> iam.Policy:
    """Allow ``ec2:TerminateInstances`` only on instances tagged ``KubernetesCluster=<cluster_name>``."""
    arn = f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:instance/*"
    policy = iam.Policy(
        scope,
        construct_id,
        roles=[role],
        statements=[
            iam.PolicyStatement(
                sid="TerminateOnlyThisClustersInstances",
                actions=["ec2:TerminateInstances"],
                resources=[arn],
                conditions={"StringEquals": {EC2_CLUSTER_TAG_CONDITION_KEY: cluster_name}},
            )
        ],
    )
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*]",
        f"the instances are launched by kOps' groups, so their ids cannot be listed here; the statement is limited "
        f"to instances tagged {CLUSTER_TAG}={cluster_name} by the {EC2_CLUSTER_TAG_CONDITION_KEY} condition.",
    )
    return policy
