"""The user's settings reach the scenario's Lambdas and agent, validated; the world keeps what it owns."""

from __future__ import annotations

import pytest

from core.exceptions import SettingsError
from core.settings import AgentSettings, InterruptionSettings, ReplenisherSettings
from scenarios.__main__ import main
from scenarios.settings import check_user_settings, settings_env, user_settings

WORLD = {"CLUSTER_NAME": "demo.k8s.local", "TABLE_NAME": "t", "QUEUE_URL": "https://q", "ACCOUNT_ID": "123456789012"}


def test_only_the_deployables_variables_are_taken_and_not_what_the_world_owns():
    env = {"EARLY_REPLACEMENT": "false", "CLUSTER_NAME": "prod", "PATH": "/bin", "SQS_WAIT_SECONDS": "3"}
    assert user_settings(InterruptionSettings, env) == {"EARLY_REPLACEMENT": "false"}
    assert user_settings(AgentSettings, env) == {"SQS_WAIT_SECONDS": "3"}


def test_the_user_wins_over_the_scenario_and_the_world_over_the_user():
    env = settings_env(
        ReplenisherSettings,
        WORLD,
        {"RECOVERY_HOLD_SECONDS": "20", "BACKOFF_MAX_SECONDS": "60"},
        {"RECOVERY_HOLD_SECONDS": "5", "TABLE_NAME": "elsewhere"},
    )
    assert env["RECOVERY_HOLD_SECONDS"] == "5" and env["BACKOFF_MAX_SECONDS"] == "60" and env["TABLE_NAME"] == "t"


def test_early_replacement_false_reaches_the_interruption_settings():
    settings = InterruptionSettings.from_env(
        settings_env(InterruptionSettings, WORLD, environ={"EARLY_REPLACEMENT": "false"})
    )
    assert settings.early_replacement is False


def test_a_bad_value_is_refused_naming_the_variable():
    with pytest.raises(SettingsError, match="SPOT_DEADLINE_SECONDS"):
        check_user_settings({"SPOT_DEADLINE_SECONDS": "abc"})
    check_user_settings({"EARLY_REPLACEMENT": "false", "SPOT_DEADLINE_SECONDS": "90"})


def test_the_demo_refuses_a_bad_setting_before_starting_anything(monkeypatch, capsys):
    monkeypatch.setenv("SPOT_DEADLINE_SECONDS", "abc")
    assert main(["spot-interruption"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SettingsError: setting SPOT_DEADLINE_SECONDS" in err
