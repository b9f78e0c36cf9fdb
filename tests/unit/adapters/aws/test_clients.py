"""Clients: bounded timeouts with standard retries, made on first use."""

from typing import Any

import boto3
import pytest

from adapters.aws.clients import LAMBDA_CONFIG, LazyClient, agent_config, clients, lazy_clients
from core.exceptions import SettingsError

SHORTEST_LAMBDA_TIMEOUT_SECONDS = 30  # infra/interruption.py


def test_lambda_calls_give_up_before_the_lambda_does() -> None:
    assert LAMBDA_CONFIG.connect_timeout + LAMBDA_CONFIG.read_timeout < SHORTEST_LAMBDA_TIMEOUT_SECONDS
    assert LAMBDA_CONFIG.retries == {"mode": "standard", "total_max_attempts": 4}


def test_a_client_leaves_the_shared_config_as_it_was() -> None:
    before = dict(LAMBDA_CONFIG.retries or {})
    boto3.client("sqs", region_name="us-east-1", config=LAMBDA_CONFIG)
    assert LAMBDA_CONFIG.retries == before


def test_the_agent_reads_past_its_long_poll() -> None:
    config = agent_config(concurrency=4, poll_wait_seconds=20)
    assert config.read_timeout > 20 and config.retries["mode"] == "standard" and config.max_pool_connections == 12


class Session:
    def __init__(self) -> None:
        self.made: list[str] = []

    def client(self, name: str, config: Any = None) -> Any:
        self.made.append(name)
        return type("Client", (), {"service": name})()

    def resource(self, name: str, config: Any = None) -> Any:
        self.made.append(f"{name} resource")
        return type("Resource", (), {"service": name})()


def test_lazy_clients_are_made_on_first_use_only() -> None:
    session = Session()
    made = lazy_clients(session, ("dynamodb", "ec2", "sqs"))
    assert session.made == [] and not made["ec2"].built
    assert made["ec2"].service == "ec2" and made["dynamodb"].service == "dynamodb"
    assert session.made == ["ec2", "dynamodb resource"]
    assert isinstance(made["sqs"], LazyClient) and not made["sqs"].built


def test_no_region_is_a_settings_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # No region anywhere botocore looks: environment, config file.
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "config"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    session = boto3.session.Session()
    assert session.region_name is None
    with pytest.raises(SettingsError) as info:
        clients(session, ("sqs",), LAMBDA_CONFIG)
    assert info.value.name == "AWS_REGION"
