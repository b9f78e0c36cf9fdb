"""The table layouts, defined once: used by the local world and tests to create tables as the CDK stack does.

The CDK stack (infra/) declares the same keys; tests/infra checks the two agree.
"""

from __future__ import annotations

from typing import Any

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"
IDEMPOTENCY_KEY = "id"  # Powertools' DynamoDBPersistenceLayer default key_attr
PARTITION_PREFIX = "CLUSTER#"  # every item of a cluster is in the partition CLUSTER#<cluster> (adapters.dynamo.table)


def partition_of(cluster: str) -> str:
    """The partition key value of ``cluster``'s items: ``CLUSTER#<cluster>``."""
    return f"{PARTITION_PREFIX}{cluster}"


def state_table(name: str) -> dict[str, Any]:
    """CreateTable arguments of the state table (LOCK, NODE#, CMD#, COMP#, RUN#, DETACH# items)."""
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
