"""The stack of one cluster with the default unit options (arm64, AWS managed encryption, no OIDC), synthesized once."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from core import schema
from core.kops import CLUSTER_TAG
from core.settings import InterruptionSettings
from infra.bundling import PROJECT_ROOT, runtime_requirements
from infra.interruption import HANDLER, REBALANCE_RECOMMENDATION, SPOT_INTERRUPTION_WARNING
from infra.nag import ACKNOWLEDGED_RULES_METADATA_KEY

from .conftest import ELF_MACHINES, Synthesis, as_list, elf_machine, only, statements, synthesize

CLUSTER = "prod.k8s.example.com"
STACK = "NodeManager-prod-k8s-example-com"
CONTEXT = {
    "clusters": [
        {
            "name": CLUSTER,
            "agent_trust_account": True,  # the account trust is tested here
            "account": "111122223333",
            "region": "eu-west-1",
            "rebalance_policy": "drain",
            "spot_deadline_seconds": 100,
            "early_replacement": False,
            "rebalance_drain_timeout_seconds": 300,
            "log_retention_days": 14,
            "log_level": "DEBUG",
            "reserved_concurrency": 3,
            "event_retry_attempts": 2,
            "event_max_age_seconds": 90,
        }
    ]
}
READ_ONLY_PREFIXES = ("Describe", "List", "Get")

pytestmark = pytest.mark.slow  # one synth (local bundling, cdk-nag, CloudFormation validation): several seconds


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="module")
def template(synth: Synthesis) -> Template:
    return synth.template(STACK)


def logical_id(template: Template, resource_type: str, props: dict[str, Any] | None = None) -> str:
    return only(template.find_resources(resource_type, {"Properties": props} if props else None))[0]


def state_table_id(template: Template) -> str:
    return logical_id(
        template,
        "AWS::DynamoDB::Table",
        {"TimeToLiveSpecification": {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True}},
    )


def function_id(template: Template) -> str:
    """The interruption Lambda (the replenisher's has its own tests in test_replenisher_stack.py)."""
    return logical_id(template, "AWS::Lambda::Function", {"Handler": HANDLER})


def queue_ids(template: Template) -> tuple[str, str]:
    """(command queue, its dead-letter queue)."""
    queue_id, queue = only(
        template.find_resources("AWS::SQS::Queue", {"Properties": {"RedrivePolicy": Match.any_value()}})
    )
    return queue_id, queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]


# -- StateStore ---------------------------------------------------------------------------------------------------


def test_state_table_matches_core_schema(template: Template) -> None:
    expected = schema.state_table("x")
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": expected["KeySchema"],
            "AttributeDefinitions": Match.array_equals(expected["AttributeDefinitions"]),
            "BillingMode": expected["BillingMode"],
            "TimeToLiveSpecification": {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


def test_state_table_is_kept_when_the_stack_goes(template: Template) -> None:
    resource = template.to_json()["Resources"][state_table_id(template)]
    assert resource["DeletionPolicy"] == "Retain"


def test_idempotency_table_matches_core_schema(template: Template) -> None:
    expected = schema.idempotency_table("x")
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": expected["KeySchema"],
            "AttributeDefinitions": expected["AttributeDefinitions"],
            "BillingMode": expected["BillingMode"],
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )
    template.resource_count_is("AWS::DynamoDB::Table", 2)


# -- CommandQueue -------------------------------------------------------------------------------------------------


def test_command_queue_redrives_to_its_dead_letter_queue_after_three_receives(template: Template) -> None:
    queue_id, dlq_id = queue_ids(template)
    resources = template.to_json()["Resources"]
    assert resources[queue_id]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 3
    assert resources[dlq_id]["Type"] == "AWS::SQS::Queue"
    assert dlq_id != queue_id


def test_every_queue_is_encrypted_and_refuses_plain_http(template: Template) -> None:
    queues = template.find_resources("AWS::SQS::Queue")
    assert len(queues) == 5  # commands, their DLQ, the interruption, replenisher and refresher rules' DLQs
    for queue in queues.values():
        assert queue["Properties"].get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue["Properties"]
    secured = set()
    for policy in template.find_resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                secured.add(statement["Resource"]["Fn::GetAtt"][0])
    assert secured == set(queues)


def test_only_the_three_lambdas_roles_may_send_commands(template: Template) -> None:
    queue_id, _ = queue_ids(template)
    lambda_roles = [
        function["Properties"]["Role"]
        for function in template.find_resources("AWS::Lambda::Function").values()
        if function["Properties"]["Handler"].startswith("lambdas.")
    ]
    assert len(lambda_roles) == 3
    denials = [
        (policy["Properties"]["Queues"], statement)
        for policy in template.find_resources("AWS::SQS::QueuePolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny" and "sqs:SendMessage" in as_list(statement["Action"])
    ]
    assert len(denials) == 1, denials
    queues, statement = denials[0]
    assert queues == [{"Ref": queue_id}]  # the command queue; SQS itself moves messages to the DLQ
    assert statement["Principal"] == {"AWS": "*"}
    assert statement["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    allowed = statement["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert sorted(map(str, allowed)) == sorted(map(str, lambda_roles))


def test_every_event_rule_matches_only_the_deployments_account(template: Template) -> None:
    """An event another account forwards to this bus (cross-account EventBridge) is never delivered to a function."""
    rules = template.find_resources("AWS::Events::Rule")
    patterned = [r["Properties"]["EventPattern"] for r in rules.values() if "EventPattern" in r["Properties"]]
    assert len(patterned) >= 5  # Spot, rebalance, state change, lifecycle, launch failure/success, agent results
    accounts = {str(p["account"]) for p in patterned}
    assert len(accounts) == 1 and all(len(p["account"]) == 1 for p in patterned), accounts


# -- InterruptionHandler ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("detail_type", [SPOT_INTERRUPTION_WARNING, REBALANCE_RECOMMENDATION])
def test_rule_sends_its_detail_type_to_the_lambda_with_retries_and_a_dead_letter_queue(
    template: Template, detail_type: str
) -> None:
    assert detail_type in ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation")
    fn = function_id(template)
    rule_id, rule = only(
        template.find_resources(
            "AWS::Events::Rule", {"Properties": {"EventPattern": {"source": ["aws.ec2"], "detail-type": [detail_type]}}}
        )
    )
    assert set(rule["Properties"]["EventPattern"]) == {"source", "detail-type", "account"}
    assert "EventBusName" not in rule["Properties"]  # the default bus, where aws.ec2 events arrive
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [fn, "Arn"]}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 90}
    dlq_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    resources = template.to_json()["Resources"]
    assert resources[dlq_id]["Type"] == "AWS::SQS::Queue"
    assert resources[dlq_id]["Properties"]["SqsManagedSseEnabled"] is True
    # EventBridge may write to the DLQ only on behalf of this rule, and invoke the Lambda only for it.
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Action": "sqs:SendMessage",
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Condition": {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}},
                            }
                        ),
                    ]
                )
            }
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::Permission", {"Principal": "events.amazonaws.com", "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}
    )
    # + the EC2 state-change rule and the lifecycle-action rule (infra/lifecycle.py; the replenisher hooks the
    # cluster's groups by tag, so the actions' rule is there without named groups)
    assert (
        len(
            template.find_resources(
                "AWS::Events::Rule",
                {"Properties": {"Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [fn, "Arn"]}})]}},
            )
        )
        == 4
    )


def test_lambda_runtime_architecture_and_limits(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.12",
            "Architectures": ["arm64"],
            "Handler": HANDLER,
            "Timeout": 30,
            "ReservedConcurrentExecutions": 3,
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": function_id(template)}, "MaximumEventAgeInSeconds": 90},
    )
    assert HANDLER == "lambdas.interruption.handler.lambda_handler"


def test_lambda_logs_to_its_own_log_group_with_retention(template: Template) -> None:
    fn = template.to_json()["Resources"][function_id(template)]["Properties"]
    group_id = fn["LoggingConfig"]["LogGroup"]["Ref"]
    assert template.to_json()["Resources"][group_id]["Properties"]["RetentionInDays"] == 14


def test_lambda_environment(template: Template) -> None:
    env = template.to_json()["Resources"][function_id(template)]["Properties"]["Environment"]["Variables"]
    queue_id, _ = queue_ids(template)
    idempotency_id = logical_id(
        template, "AWS::DynamoDB::Table", {"TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True}}
    )
    assert env == {
        "CLUSTER_NAME": CLUSTER,
        "TABLE_NAME": {"Ref": state_table_id(template)},
        "QUEUE_URL": {"Ref": queue_id},
        "IDEMPOTENCY_TABLE_NAME": {"Ref": idempotency_id},
        "SPOT_DEADLINE_SECONDS": "100",
        "EARLY_REPLACEMENT": "false",
        "REBALANCE_POLICY": "drain",
        "REBALANCE_DRAIN_TIMEOUT_SECONDS": "300",
        "REBALANCE_QUIET_SECONDS": "1800",
        "REBALANCE_REPLACE_LIMIT": "1",
        "REBALANCE_MAX_CORDONED_PERCENT": "20",
        "DRY_RUN": "false",
        "POWERTOOLS_SERVICE_NAME": "interruption",
        "POWERTOOLS_METRICS_NAMESPACE": "NodeManager",
        "LOG_LEVEL": "DEBUG",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    # What the Lambda will read at start validates, once CloudFormation has resolved the references.
    resolved = {k: v if isinstance(v, str) else f"resolved-{k.lower()}" for k, v in env.items()}
    settings = InterruptionSettings.from_env(resolved)
    assert settings.cluster_name == CLUSTER and settings.spot_deadline_seconds == 100


# -- IAM ----------------------------------------------------------------------------------------------------------


def test_lambda_detaches_only_instances_of_this_clusters_groups(template: Template) -> None:
    role = {
        "Ref": logical_id(
            template,
            "AWS::IAM::Role",
            {
                "AssumeRolePolicyDocument": {
                    "Statement": [Match.object_like({"Principal": {"Service": "lambda.amazonaws.com"}})]
                },
                "Description": Match.string_like_regexp("interruption"),
            },
        )
    }
    detach = [s for s in statements(template) if "autoscaling:DetachInstances" in as_list(s["Action"])]
    assert len(detach) == 1
    assert detach[0]["_roles"] == [role]
    assert detach[0]["Condition"] == {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": CLUSTER}}
    assert CLUSTER_TAG == "KubernetesCluster"
    assert detach[0]["Resource"] != "*"


def test_every_mutating_ec2_or_autoscaling_call_is_scoped_to_the_cluster_tag(template: Template) -> None:
    for statement in statements(template):
        if statement["Effect"] == "Deny":
            continue  # the group guard's Deny statements only narrow what the Allow statements give
        for action in as_list(statement["Action"]):
            service, verb = action.split(":", 1)
            if service in ("autoscaling", "ec2") and not verb.startswith(READ_ONLY_PREFIXES):
                # Auto Scaling calls by the group's tag; ec2:TerminateInstances by the instance's own tag
                assert statement["Condition"]["StringEquals"][f"{service}:ResourceTag/{CLUSTER_TAG}"] == CLUSTER


def test_unscopable_describe_calls_have_their_own_statement_on_star(template: Template) -> None:
    allowed = [s for s in statements(template) if s["Effect"] == "Allow"]
    everywhere = [s for s in allowed if "*" in as_list(s["Resource"])]
    # the agent's PutMetricData (no resource-level permissions) is scoped by its namespace condition instead
    [metrics] = [s for s in everywhere if as_list(s["Action"]) == ["cloudwatch:PutMetricData"]]
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "NodeManager"}}
    star = [s for s in everywhere if s is not metrics]
    assert star, "the Describe calls must be allowed somewhere"
    for statement in star:
        assert all(a.split(":", 1)[1].startswith(READ_ONLY_PREFIXES) for a in as_list(statement["Action"]))
        assert "Condition" not in statement
        assert len(as_list(statement["Resource"])) == 1
    granted = {a for s in star for a in as_list(s["Action"])}
    assert {
        "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeAutoScalingGroups",
        "ec2:DescribeInstances",
    } <= granted


def test_lambda_uses_table_and_queue_through_grants_on_those_resources_only(template: Template) -> None:
    queue_id, _ = queue_ids(template)
    table = state_table_id(template)
    by_action: dict[str, list[Any]] = {}
    for statement in statements(template):
        for action in as_list(statement["Action"]):
            if action.startswith(("dynamodb:", "sqs:")):
                by_action.setdefault(action, []).extend(as_list(statement["Resource"]))
    assert {"Fn::GetAtt": [queue_id, "Arn"]} in by_action["sqs:SendMessage"]
    assert {"Fn::GetAtt": [table, "Arn"]} in by_action["dynamodb:PutItem"]
    assert all(resource != "*" for resources in by_action.values() for resource in resources)
    assert not any(a.endswith("*") for a in by_action)


def agent_role_id(template: Template) -> str:
    return logical_id(template, "AWS::IAM::Role", {"Description": Match.string_like_regexp("agent")})


def test_agent_role_is_assumable_by_the_account_without_oidc(template: Template) -> None:
    role = template.to_json()["Resources"][agent_role_id(template)]["Properties"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Principal"]["AWS"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::111122223333:root"]]
    }


def test_agent_role_permissions(template: Template) -> None:
    role = {"Ref": agent_role_id(template)}
    queue_id, _ = queue_ids(template)
    granted: dict[str, list[Any]] = {}
    for statement in statements(template):
        if role in statement["_roles"]:
            for action in as_list(statement["Action"]):
                granted.setdefault(action, []).extend(as_list(statement["Resource"]))
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert granted[action] == [{"Fn::GetAtt": [queue_id, "Arn"]}]
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"):
        assert granted[action] and all(r == {"Fn::GetAtt": [state_table_id(template), "Arn"]} for r in granted[action])
    (bus,) = granted["events:PutEvents"]
    assert bus == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":events:eu-west-1:111122223333:event-bus/default"]]
    }
    assert granted["autoscaling:DescribeAutoScalingInstances"] == ["*"]
    assert "sqs:SendMessage" not in granted and "autoscaling:DetachInstances" not in granted


def dynamodb_allowed(mine: list[dict[str, Any]], table: Any, action: str, pk: str | None) -> bool:
    """Whether ``mine`` (IAM statements) allow ``action`` on ``table`` for a request whose partition key is ``pk``
    (None: a request naming none, a Scan). Evaluates what the stack writes: ``Allow`` and ``Deny`` statements,
    ``Action`` with wildcards, ``Resource`` equal to the table or ``*``, and the ``ForAllValues:StringEquals``
    condition on ``dynamodb:LeadingKeys`` (every value of the request's set among the allowed ones; an empty set
    matches, as in IAM). Any other condition on a table statement fails the test rather than being guessed."""

    def matches(statement: dict[str, Any]) -> bool:
        if not any(fnmatch.fnmatchcase(action, a) for a in as_list(statement["Action"])):
            return False
        if not any(r in ("*", table) for r in as_list(statement["Resource"])):
            return False
        for operator, keys in statement.get("Condition", {}).items():
            assert operator == "ForAllValues:StringEquals" and set(keys) == {"dynamodb:LeadingKeys"}, statement
            if pk is not None and pk not in as_list(keys["dynamodb:LeadingKeys"]):
                return False
        return True

    hits = [s for s in mine if matches(s)]
    return any(s["Effect"] == "Allow" for s in hits) and not any(s["Effect"] == "Deny" for s in hits)


WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem")


def test_the_agents_role_writes_only_its_own_item_kinds(template: Template) -> None:
    """The synthesized policy, evaluated against item keys: the agent's kinds (``NODE#``, ``MEMBERSHIP``, ``CMD#``,
    ``HOOK#``, ``CPDRAIN#``) can be written; ``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#`` and ``POLL#`` cannot (nor
    anything of another cluster, nor through a call without a partition key), nor even read: the policy names only the
    agent's partition in ``dynamodb:LeadingKeys``."""
    role = {"Ref": agent_role_id(template)}
    mine = [s for s in statements(template) if role in s["_roles"]]
    table = {"Fn::GetAtt": [state_table_id(template), "Arn"]}
    for sk in ("NODE#i-1", "MEMBERSHIP", "CMD#spot-1", "HOOK#i-1", "CPDRAIN#0"):
        pk = schema.partition_for(CLUSTER, sk)
        assert pk == schema.agent_partition_of(CLUSTER)
        for action in ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"):
            assert dynamodb_allowed(mine, table, action, pk), (action, sk)
    for sk in ("LOCK", "COMP#nodes-a", "RUN#20240101T000000Z-000001", "DETACH#i-1", "POLL#r"):
        pk = schema.partition_for(CLUSTER, sk)
        assert pk == schema.partition_of(CLUSTER)
        for action in (*WRITES, "dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchWriteItem"):
            assert not dynamodb_allowed(mine, table, action, pk), (action, sk)
    leading = [
        key
        for s in mine
        for keys in s.get("Condition", {}).values()
        for key in as_list(keys.get("dynamodb:LeadingKeys", []))
    ]
    assert leading and set(leading) == {schema.agent_partition_of(CLUSTER)}
    other = schema.agent_partition_of("other.k8s.example.com")
    for action in (*WRITES, "dynamodb:GetItem", "dynamodb:Query"):
        assert not dynamodb_allowed(mine, table, action, other), action
    for action in ("dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:PartiQLUpdate", "dynamodb:DeleteTable"):
        assert not dynamodb_allowed(mine, table, action, None), action


def test_the_agent_puts_only_its_own_events(template: Template) -> None:
    role = {"Ref": agent_role_id(template)}
    mine = [s for s in statements(template) if role in s["_roles"]]
    (events,) = [s for s in mine if "events:PutEvents" in as_list(s["Action"])]
    assert events["Condition"] == {"StringEquals": {"events:source": "node-manager.agent"}}


def test_outputs(template: Template) -> None:
    template.has_output("AgentRoleArn", {"Value": {"Fn::GetAtt": [agent_role_id(template), "Arn"]}})
    template.has_output("CommandQueueUrl", {"Value": {"Ref": queue_ids(template)[0]}})
    template.has_output("StateTableName", {"Value": {"Ref": state_table_id(template)}})


# -- cdk-nag ------------------------------------------------------------------------------------------------------


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


# -- the Lambda asset ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def asset(synth: Synthesis, template: Template) -> Path:
    return synth.function_asset_dir(STACK, function_id(template))


def test_asset_holds_the_handler_and_core(asset: Path) -> None:
    module = HANDLER.rsplit(".", 1)[0].replace(".", "/") + ".py"
    assert (asset / module).is_file(), f"{module} missing from the asset"
    for source in (PROJECT_ROOT / "core").glob("*.py"):
        assert (asset / "core" / source.name).read_bytes() == source.read_bytes()


def test_asset_native_code_is_for_the_lambdas_platform(asset: Path) -> None:
    (pydantic_core,) = asset.glob("pydantic_core/_pydantic_core*.so")
    assert pydantic_core.name == "_pydantic_core.cpython-312-aarch64-linux-gnu.so"
    shared_objects = list(asset.rglob("*.so"))
    assert {elf_machine(so) for so in shared_objects} == {ELF_MACHINES["arm64"]}
    for wheel in asset.glob("*.dist-info/WHEEL"):
        tags = [line.split(":", 1)[1].strip() for line in wheel.read_text().splitlines() if line.startswith("Tag:")]
        assert all(
            tag.startswith(("py3-none-any", "cp312-cp312-manylinux")) and tag.endswith(("any", "aarch64"))
            for tag in tags
        ), (wheel, tags)


def test_asset_has_bytecode_only_for_the_lambdas_python_and_no_tests(asset: Path) -> None:
    paths = [str(p.relative_to(asset)) for p in asset.rglob("*")]
    pycs = [p for p in paths if p.endswith(".pyc")]
    assert pycs, "the asset ships bytecode (infra.bundling: a CPython 3.12 is on this machine kind)"
    assert [p for p in pycs if not (p.endswith(".cpython-312.pyc") and Path(p).parent.name == "__pycache__")] == []
    assert [p for p in paths if "cpython-311" in p] == []
    assert not (asset / "tests").exists()
    assert [
        p
        for p in paths
        if p.startswith(("core/", "lambdas/"))
        and (Path(p).name.startswith("test_") or "/tests/" in p or Path(p).name == "conftest.py")
    ] == []


def test_asset_dependencies_are_the_pinned_ones_and_not_boto3(asset: Path) -> None:
    for line in runtime_requirements(PROJECT_ROOT / "requirements.txt"):
        name, version = line.split("==")
        distribution = name.split("[")[0].replace("-", "_")
        assert (asset / f"{distribution}-{version.strip()}.dist-info").is_dir(), line
    assert not (asset / "boto3").exists() and not (asset / "botocore").exists()
    assert not (asset / "kubernetes").exists()


def test_the_outputs_configure_agent_reads_are_the_stacks(template: Template) -> None:
    """``node-manager configure-agent`` reads these outputs of the stack named after the cluster."""
    from cli.agentconf import OUTPUTS, stack_name_of

    assert set(OUTPUTS) <= set(template.to_json()["Outputs"])
    assert stack_name_of(CLUSTER) == STACK
