"""StateStore: the cluster's DynamoDB state table and the Powertools idempotency table.

Keys and the TTL attribute come from ``core/schema.py`` (the layout the Lambdas, the agent and the local world use);
``tests/infra`` checks the synthesized tables against it.

- State table: ``pk``/``sk`` strings, TTL on ``expires_at`` (epoch seconds; correctness never relies on the deletion,
  which lags up to days), point-in-time recovery, on-demand capacity, encrypted with the AWS managed key or the
  stack's KMS key. Retained when the stack is deleted.
- Idempotency table: partition key ``id``, TTL on ``expiration`` (Powertools' ``DynamoDBPersistenceLayer``
  defaults, https://docs.powertools.aws.dev/lambda/python/latest/utilities/idempotency/).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from core import schema
from infra.nag import acknowledge

# Powertools' DynamoDBPersistenceLayer default ``expiry_attr``.
IDEMPOTENCY_TTL_ATTRIBUTE = "expiration"

# What adapters/dynamo/table.py calls (GetItem, Query, PutItem, UpdateItem, DeleteItem; conditional where it matters).
# A fenced put is a TransactWriteItems, which has no IAM action of its own: each of its parts is authorised as its
# own action, the put as PutItem and the check of the LOCK item as ConditionCheckItem (DynamoDB Developer Guide,
# "Using IAM with DynamoDB transactions").
STORE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)
# What the agent calls, on its own partition only (no fenced write: ConditionCheckItem is not needed).
AGENT_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)
# What Powertools' DynamoDBPersistenceLayer calls.
IDEMPOTENCY_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)
# A caller of a table encrypted with a customer managed key needs these on the key
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/encryption.usagenotes.html).
TABLE_KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")


def _attribute(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class StateStore(Construct):
    """The state table and the idempotency table of one cluster.

    Parameters:
        encryption_key: encrypt both tables with this customer managed key; None: the AWS managed key.

    Attributes:
        table: the state table (``TABLE_NAME`` of the Lambdas and the agent).
        idempotency_table: the Powertools idempotency table (``IDEMPOTENCY_TABLE_NAME``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, encryption_key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        self.encryption_key = encryption_key
        encryption = (
            dynamodb.TableEncryption.CUSTOMER_MANAGED
            if encryption_key is not None
            else dynamodb.TableEncryption.AWS_MANAGED
        )

        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_attribute(schema.PARTITION_KEY),
            sort_key=_attribute(schema.SORT_KEY),
            time_to_live_attribute=schema.TTL_ATTRIBUTE,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=encryption,
            encryption_key=encryption_key,
            removal_policy=RemovalPolicy.RETAIN,
        )

        self.idempotency_table = dynamodb.Table(
            self,
            "IdempotencyTable",
            partition_key=_attribute(schema.IDEMPOTENCY_KEY),
            time_to_live_attribute=IDEMPOTENCY_TTL_ATTRIBUTE,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=encryption,
            encryption_key=encryption_key,
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(
            self.idempotency_table,
            "AwsSolutions-DDB3",
            "Idempotency records only deduplicate events for about an hour (Powertools' expiry) and "
            "restoring them has no use; the state table has point-in-time recovery.",
        )

    def grant_store_access(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` use the state table through ``adapters.dynamo`` (``STORE_ACTIONS``)."""
        self.table.grant(grantee, *STORE_ACTIONS)
        self._grant_key(grantee)

    def grant_agent_access(self, role: iam.IRole, cluster_name: str) -> iam.Policy:
        """Let the agent's ``role`` read and write only the items of ``cluster_name``'s agent partition.

        IAM can condition DynamoDB access on the partition key only (``dynamodb:LeadingKeys``; no condition key names
        the sort key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html), so
        the item kinds the agent writes (``core.schema.AGENT_ITEM_PREFIXES``: ``NODE#``, ``MEMBERSHIP``, ``CMD#``
        and its pointers, ``HOOK#``, ``CPDRAIN#``) live in a partition of their own, ``CLUSTER#<cluster>#AGENT``
        (``core.schema.agent_partition_of``):

        ``AgentItems``: ``AGENT_ACTIONS`` with ``dynamodb:LeadingKeys`` = that partition only. ``LOCK``, ``COMP#``,
        ``RUN#``, ``DETACH#`` and ``POLL#`` (``CLUSTER#<cluster>``) can be neither written nor read, so a stolen agent
        credential cannot take the lock, forge a compensation or a refresh run, scale anything through them, or read
        a run's or a ledger's contents (the lock's age, ``LockHeldSeconds``, is the replenisher's metric).

        It grants no action without a partition key (``Scan``, ``BatchWriteItem``): ``ForAllValues`` holds for a
        request with no ``dynamodb:LeadingKeys`` value at all.
        """
        policy = iam.Policy(
            self,
            "PartitionPolicy",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    sid="AgentItems",
                    actions=list(AGENT_ACTIONS),
                    resources=[self.table.table_arn],
                    conditions={
                        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [schema.agent_partition_of(cluster_name)]}
                    },
                ),
            ],
        )
        self._grant_key(role)
        return policy

    def grant_idempotency_access(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` keep Powertools idempotency records (``IDEMPOTENCY_ACTIONS``)."""
        self.idempotency_table.grant(grantee, *IDEMPOTENCY_ACTIONS)
        self._grant_key(grantee)

    def _grant_key(self, grantee: iam.IGrantable) -> None:
        if self.encryption_key is not None:
            self.encryption_key.grant(grantee, *TABLE_KEY_ACTIONS)
