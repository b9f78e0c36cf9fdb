import pytest
from pydantic import ValidationError

from core.exceptions import SettingsError
from core.settings import AgentSettings, InterruptionSettings, PdbDeadlinePolicy, RebalancePolicy

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


def test_drain_grace_settings():
    s = AgentSettings.from_env(BASE)
    assert s.drain_grace_margin_seconds == 10.0
    assert s.drain_pdb_deadline_policy is PdbDeadlinePolicy.DELETE
    s = AgentSettings.from_env({**BASE, "DRAIN_GRACE_MARGIN_SECONDS": "5", "DRAIN_PDB_DEADLINE_POLICY": "honor"})
    assert s.drain_grace_margin_seconds == 5.0 and s.drain_pdb_deadline_policy is PdbDeadlinePolicy.HONOR
    for var, value in (("DRAIN_PDB_DEADLINE_POLICY", "evict"), ("DRAIN_GRACE_MARGIN_SECONDS", "-1")):
        with pytest.raises(SettingsError) as info:
            AgentSettings.from_env({**BASE, var: value})
        assert info.value.name == var


def test_wave_settings_bound_the_agent_by_request_rate():
    s = AgentSettings.from_env(BASE)
    assert (s.concurrency, s.max_in_flight, s.kube_qps, s.kube_burst) == (64, 256, 50.0, 100)
    s = AgentSettings.from_env({**BASE, "AGENT_KUBE_QPS": "5", "AGENT_KUBE_BURST": "10", "AGENT_MAX_IN_FLIGHT": "64"})
    assert (s.kube_qps, s.kube_burst, s.max_in_flight) == (5.0, 10, 64)
    with pytest.raises(SettingsError, match="AGENT_MAX_IN_FLIGHT"):
        AgentSettings.from_env({**BASE, "AGENT_CONCURRENCY": "100", "AGENT_MAX_IN_FLIGHT": "50"})
    with pytest.raises(SettingsError):
        AgentSettings.from_env({**BASE, "AGENT_KUBE_QPS": "0"})


@pytest.mark.parametrize(
    ("settings", "lease_var", "lease", "timeout"),
    [
        ("ReplenisherSettings", "LOCK_LEASE_SECONDS", "80", "60"),
        ("RefresherSettings", "REFRESH_LOCK_LEASE_SECONDS", "140", "120"),
        ("RefresherSettings", "REFRESH_LOCK_LEASE_SECONDS", "900", "900"),
    ],
)
def test_a_lock_lease_shorter_than_the_function_timeout_plus_margin_is_refused(settings, lease_var, lease, timeout):
    import core.settings

    cls = getattr(core.settings, settings)
    base = {"CLUSTER_NAME": "c", "TABLE_NAME": "t", "QUEUE_URL": "q", "FUNCTION_TIMEOUT_SECONDS": timeout}
    with pytest.raises(SettingsError) as info:
        cls.from_env({**base, lease_var: lease})
    assert info.value.name == lease_var and f"function timeout ({timeout} s)" in str(info.value)
    fits = int(timeout) + 30
    assert cls.from_env({**base, lease_var: str(fits)}).lock_lease_seconds == fits
    # without a known timeout the lease is checked by the handler, against the invocation's context
    assert cls.from_env({**base, "FUNCTION_TIMEOUT_SECONDS": "", lease_var: lease}).function_timeout_seconds is None


def test_the_default_leases_fit_the_stack_s_timeouts():
    from core.settings import RefresherSettings, ReplenisherSettings

    base = {"CLUSTER_NAME": "c", "TABLE_NAME": "t", "QUEUE_URL": "q"}
    assert ReplenisherSettings.from_env({**base, "FUNCTION_TIMEOUT_SECONDS": "60"}).lock_lease_seconds == 120
    assert RefresherSettings.from_env({**base, "FUNCTION_TIMEOUT_SECONDS": "120"}).lock_lease_seconds == 180


def test_run_retention_is_a_month_by_default_and_at_least_a_day():
    from core.settings import RefresherSettings

    base = {"CLUSTER_NAME": "c", "TABLE_NAME": "t", "QUEUE_URL": "q"}
    assert RefresherSettings.from_env(base).run_retention_seconds == 2_592_000
    assert RefresherSettings.from_env({**base, "RUN_RETENTION_SECONDS": "86400"}).run_retention_seconds == 86400
    with pytest.raises(SettingsError) as info:
        RefresherSettings.from_env({**base, "RUN_RETENTION_SECONDS": "86399"})
    assert "RUN_RETENTION_SECONDS" in str(info.value)


def test_a_refresh_max_age_no_run_record_can_hold_is_refused():
    """Every scheduled run stores the settings' max age in its RUN# item (38 digits at most): one longer than a
    century is refused when the settings are read, not at each week's CreateRun (``decimal.Rounded``)."""
    from core.settings import RefresherSettings

    base = {"CLUSTER_NAME": "c", "TABLE_NAME": "t", "QUEUE_URL": "q"}
    assert RefresherSettings.from_env({**base, "REFRESH_MAX_AGE": "36500d"}).max_age_seconds == 36500 * 86400
    with pytest.raises(SettingsError):
        RefresherSettings.from_env({**base, "REFRESH_MAX_AGE": "9" * 41 + "d"})
