"""The idempotency table of the interruption Lambda: Powertools' DynamoDB persistence layer over our client."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer


def persistence_layer(table_name: str, client: Any | None) -> DynamoDBPersistenceLayer:
    """Powertools' persistence layer on ``table_name`` through ``client`` (a ``dynamodb`` client, or a
    ``LazyClient``; None lets Powertools make its own)."""
    return DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)
