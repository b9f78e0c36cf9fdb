import pytest
from pydantic import ValidationError

from core.exceptions import SettingsError
from core.settings import AgentSettings, InterruptionSettings, RebalancePolicy

BASE = {"CLUSTER_NAME": "demo", "TABLE_NAME": "t", "QUEUE_URL": "http://q"}


def test_defaults():
    s = InterruptionSettings.from_env(BASE)
    assert s.spot_deadline_seconds == 120
    assert s.early_replacement is True
    assert s.rebalance_policy is RebalancePolicy.CORDON


def test_values_are_parsed_and_frozen():
    s = InterruptionSettings.from_env({**BASE, "EARLY_REPLACEMENT": "false", "REBALANCE_POLICY": "drain"})
    assert s.early_replacement is False and s.rebalance_policy is RebalancePolicy.DRAIN
    with pytest.raises(ValidationError):
        s.cluster_name = "x"


@pytest.mark.parametrize(
    "env, var",
    [
        ({"TABLE_NAME": "t", "QUEUE_URL": "q"}, "CLUSTER_NAME"),
        ({**BASE, "REBALANCE_POLICY": "panic"}, "REBALANCE_POLICY"),
        ({**BASE, "SPOT_DEADLINE_SECONDS": "1"}, "SPOT_DEADLINE_SECONDS"),
    ],
)
def test_errors_name_the_variable(env, var):
    with pytest.raises(SettingsError) as info:
        InterruptionSettings.from_env(env)
    assert info.value.name == var


def test_agent_cross_field_validation():
    with pytest.raises(SettingsError, match="STALE_RUNNING_SECONDS"):
        AgentSettings.from_env({**BASE, "SQS_VISIBILITY_TIMEOUT_SECONDS": "120", "STALE_RUNNING_SECONDS": "60"})
