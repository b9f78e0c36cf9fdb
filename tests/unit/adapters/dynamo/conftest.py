"""A cluster's partition of the state table on moto's DynamoDB."""

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.store import Store
from core.schema import state_table


@pytest.fixture
def store() -> Iterator[Store]:
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        yield Store(ddb.Table("state"), "demo")
