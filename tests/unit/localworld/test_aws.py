"""``localworld.aws.serialise_dynamodb``: one lock in moto's DynamoDB request path, installed once."""

import threading

import boto3
from moto import mock_aws
from moto.dynamodb.responses import DynamoHandler

from core.schema import state_table
from localworld.aws import DYNAMODB_LOCK, serialise_dynamodb
from localworld.lockrace import unserialised_dynamodb


def test_installed_once_and_every_dynamodb_request_waits_for_the_lock() -> None:
    serialise_dynamodb()
    assert serialise_dynamodb() is False  # already there: not wrapped twice
    assert DynamoHandler.call_action.__wrapped__ is not None  # type: ignore[attr-defined]
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
        done = threading.Event()

        def put() -> None:
            ddb.put_item(TableName="state", Item={"pk": {"S": "p"}, "sk": {"S": "LOCK"}})
            done.set()

        with DYNAMODB_LOCK:  # a request in progress
            worker = threading.Thread(target=put)
            worker.start()
            assert not done.wait(0.3), "a DynamoDB request ran beside another"
        assert done.wait(10)
        worker.join()


def test_the_lock_can_be_taken_away_for_a_while_and_comes_back() -> None:
    serialise_dynamodb()
    installed = DynamoHandler.call_action
    with unserialised_dynamodb():
        assert DynamoHandler.call_action is installed.__wrapped__  # type: ignore[attr-defined]
    assert DynamoHandler.call_action is installed
