"""The table layouts, defined once: used by the local world and tests to create tables as the CDK stack does.

The CDK stack (infra/) declares the same keys; tests/infra checks the two agree.
"""

from __future__ import annotations

from typing import Any

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"
IDEMPOTENCY_KEY = "id"  # Powertools' DynamoDBPersistenceLayer default key_attr
PARTITION_PREFIX = "CLUSTER#"  # a cluster's items are in the partitions CLUSTER#<cluster> and CLUSTER#<cluster>#AGENT
AGENT_PARTITION_SUFFIX = "#AGENT"
# The item kinds the in-cluster agent writes, kept in a partition of their own so that its role's
# ``dynamodb:LeadingKeys`` can name that partition alone: ``NODE#`` and ``MEMBERSHIP`` (membership), ``CMD#`` (a
# command's status), ``HOOK#`` (claiming a lifecycle action), ``CPDRAIN#`` (control-plane drain slots), and beside
# ``CMD#`` the pointers the Lambdas write with each command, ``ICMD#`` (an instance's) and ``OCMD#`` (an open one's:
# ``adapters.dynamo.command_index``). Every other kind (``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#``, ``POLL#``) stays
# in the cluster partition, which only the Lambdas write.
AGENT_ITEM_PREFIXES = ("NODE#", "MEMBERSHIP", "CMD#", "HOOK#", "CPDRAIN#", "ICMD#", "OCMD#")


def partition_of(cluster: str) -> str:
    """The partition key value of ``cluster``'s Lambda-only items (``LOCK``, ``COMP#``, ``RUN#``, ``DETACH#``,
    ``POLL#``): ``CLUSTER#<cluster>``."""
    return f"{PARTITION_PREFIX}{cluster}"


def agent_partition_of(cluster: str) -> str:
    """The partition key value of the items the agent writes (``AGENT_ITEM_PREFIXES``): ``CLUSTER#<cluster>#AGENT``.
    kOps cluster names are DNS names (no ``#``), so no cluster's partition is another's agent partition."""
    return f"{PARTITION_PREFIX}{cluster}{AGENT_PARTITION_SUFFIX}"


def agent_item(sk: str) -> bool:
    """True when the item (or sort-key prefix) ``sk`` is of a kind the agent writes (``AGENT_ITEM_PREFIXES``)."""
    return sk.startswith(AGENT_ITEM_PREFIXES)


def partition_for(cluster: str, sk: str) -> str:
    """The partition key value of ``cluster``'s item ``sk``: its agent partition for the agent's kinds, else its
    cluster partition."""
    return agent_partition_of(cluster) if agent_item(sk) else partition_of(cluster)


def state_table(name: str) -> dict[str, Any]:
    """CreateTable arguments of the state table (both partitions of every cluster: ``partition_for``)."""
    return {
        "TableName": name,
        "KeySchema": [
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": SORT_KEY, "AttributeType": "S"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }


def idempotency_table(name: str) -> dict[str, Any]:
    """CreateTable arguments of the Powertools idempotency table."""
    return {
        "TableName": name,
        "KeySchema": [{"AttributeName": IDEMPOTENCY_KEY, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": IDEMPOTENCY_KEY, "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
