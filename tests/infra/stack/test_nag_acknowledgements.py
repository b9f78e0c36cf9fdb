"""cdk-nag on the stack: nothing unacknowledged, and every acknowledgement on one resource with a reason."""

from __future__ import annotations

import re

import pytest
from cdk_nag import AwsSolutionsChecks

from infra.nag import ACKNOWLEDGED_RULES_METADATA_KEY
from tests.infra.conftest import Synthesis
from tests.infra.stack.resources import STACK

pytestmark = pytest.mark.slow  # the package's one synth (tests/infra/stack/conftest.py): several seconds


def test_cdk_nag_reports_nothing_unacknowledged(synth: Synthesis) -> None:
    report = synth.validation_report()
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []
    direct = AwsSolutionsChecks().validate_scope(synth.stack(STACK))
    assert direct.success, [v.rule_name for v in direct.violations]


def acknowledgements(synth: Synthesis) -> dict[str, dict[str, str]]:
    """construct path -> {rule id: reason} for every acknowledgement in the app."""
    found: dict[str, dict[str, str]] = {}
    for construct in synth.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == ACKNOWLEDGED_RULES_METADATA_KEY:
                found.setdefault(construct.node.path, {}).update(entry.data)
    return found


def test_every_acknowledgement_has_a_reason_and_covers_one_resource(synth: Synthesis) -> None:
    acks = acknowledgements(synth)
    for path, rules in acks.items():
        assert path.count("/") >= 2, f"{path}: acknowledge on the resource's construct, not the stack"
        for rule, reason in rules.items():
            assert len(reason.strip()) > 20, (path, rule)
    by_rule = sorted(
        (path.split("/", 1)[1], re.sub(r"^annotation::", "", rule, flags=re.IGNORECASE))
        for path, rules in acks.items()
        for rule in rules
    )
    assert by_rule == sorted(
        [
            ("Agent/DescribePolicy", "AwsSolutions-IAM5[Resource::*]"),
            ("Agent/MetricsPolicy", "AwsSolutions-IAM5[Resource::*]"),
            (
                "Agent/LifecycleHooksPolicy",
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:"
                "<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*:"
                "autoScalingGroupName/*]",
            ),
            ("Interruption/DescribePolicy", "AwsSolutions-IAM5[Resource::*]"),
            (
                "Interruption/ClusterGroupsPolicy",
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:"
                "<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*:"
                "autoScalingGroupName/*]",
            ),
            ("Interruption/EventDeadLetterQueue", "AwsSolutions-SQS3"),
            ("Interruption/Function", "AwsSolutions-L1"),
            ("Replenisher/DescribePolicy", "AwsSolutions-IAM5[Resource::*]"),
            (
                "Replenisher/ClusterGroupsPolicy",
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:"
                "<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*:"
                "autoScalingGroupName/*]",
            ),
            ("Replenisher/EventDeadLetterQueue", "AwsSolutions-SQS3"),
            (
                "Replenisher/TerminateDetachedPolicy",
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*]",
            ),
            ("Replenisher/Function", "AwsSolutions-L1"),
            ("Refresher/DescribePolicy", "AwsSolutions-IAM5[Resource::*]"),
            (
                "Refresher/ClusterGroupsPolicy",
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:"
                "<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*:"
                "autoScalingGroupName/*]",
            ),
            ("Refresher/EventDeadLetterQueue", "AwsSolutions-SQS3"),
            ("Refresher/Function", "AwsSolutions-L1"),
            ("State/IdempotencyTable", "AwsSolutions-DDB3"),
        ]
    )
