"""The cdk.json context → frozen settings, and its agreement with what the Lambda validates at start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from core.exceptions import SettingsError
from core.settings import InterruptionSettings, RebalancePolicy
from infra.application import build_app, read_cdk_json_context
from infra.bundling import PROJECT_ROOT
from infra.config import Architecture, ClusterConfig, Encryption, load_config


def clusters(**overrides: Any) -> dict[str, Any]:
    return {"clusters": [{"name": "dev.k8s.local", "agent_trust_account": True, **overrides}]}


def test_defaults() -> None:
    cluster = load_config(clusters()).clusters[0]
    assert cluster.lambda_architecture is Architecture.ARM64
    assert cluster.rebalance_policy is RebalancePolicy.CORDON
    assert cluster.encryption is Encryption.AWS_MANAGED
    assert cluster.stack_name == "NodeManager-dev-k8s-local"


def test_settings_are_frozen() -> None:
    cluster = load_config(clusters()).clusters[0]
    with pytest.raises(ValidationError):
        cluster.spot_deadline_seconds = 30  # type: ignore[misc]  # the assignment a frozen model must refuse


def test_the_repository_cdk_json_validates() -> None:
    config = load_config(read_cdk_json_context(PROJECT_ROOT / "cdk.json"))
    assert config.clusters


@pytest.mark.parametrize(
    ("context", "key", "says"),
    [
        ({}, "clusters", "missing"),
        ({"clusters": []}, "clusters", "at least 1"),
        ({"clusters": "not json"}, "clusters", "JSON"),
        (clusters(spot_deadline_seconds=5), "clusters[0].spot_deadline_seconds", "greater than or equal to 10"),
        (clusters(spot_deadline_seconds="soon"), "clusters[0].spot_deadline_seconds", "integer"),
        (
            clusters(rebalance_policy="reboot"),
            "clusters[0].rebalance_policy",
            "'ignore', 'cordon', 'drain' or 'replace'",
        ),
        (clusters(lambda_architecture="ppc64"), "clusters[0].lambda_architecture", "'arm64' or 'x86_64'"),
        (clusters(log_retention_days=10), "clusters[0].log_retention_days", "retention periods"),
        (clusters(encryption="none"), "clusters[0].encryption", "'aws-managed' or 'kms'"),
        (clusters(early_replacement="perhaps"), "clusters[0].early_replacement", "boolean"),
        (clusters(reserved_concurrency=-1), "clusters[0].reserved_concurrency", "greater than or equal to 0"),
        (clusters(rebalance_drain_timeout_seconds=1), "clusters[0].rebalance_drain_timeout_seconds", "greater than"),
        (clusters(event_max_age_seconds=30), "clusters[0].event_max_age_seconds", "greater than or equal to 60"),
        (clusters(account="12345"), "clusters[0].account", "pattern"),
        (clusters(name="Prod_Cluster"), "clusters[0].name", "kOps cluster name"),
        (clusters(agent_oidc_provider_arn="oidc.example.com"), "clusters[0].agent_oidc_provider_arn", "OIDC"),
        (clusters(agent_service_account="agent"), "clusters[0].agent_service_account", "<namespace>:"),
        (clusters(agent_role_arn="arn:aws:iam::111122223333:user/x"), "clusters[0].agent_role_arn", "role ARN"),
        (clusters(irsa_audience="amazon aws"), "clusters[0].irsa_audience", "pattern"),
        (clusters(irsa_audience=""), "clusters[0].irsa_audience", "pattern"),
        (clusters(typo_key=1), "clusters[0].typo_key", "Extra inputs"),
        (
            {
                "clusters": [
                    {"name": "a.example.com", "agent_trust_account": True},
                    {"name": "b.example.com", "agent_trust_account": True, "log_level": "LOUD"},
                ]
            },
            "clusters[1].log_level",
            "'DEBUG'",
        ),
        ({"clusters": [{"rebalance_policy": "drain"}]}, "clusters[0].name", "Field required"),
    ],
)
def test_a_bad_value_names_its_key(context: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_config(context)
    assert caught.value.name == key
    assert says in str(caught.value)


def test_exclusive_agent_trust_settings() -> None:
    with pytest.raises(SettingsError, match="exclusive") as caught:
        load_config(
            clusters(
                agent_role_arn="arn:aws:iam::111122223333:role/agent",
                agent_oidc_provider_arn="arn:aws:iam::111122223333:oidc-provider/oidc.example.com",
            )
        )
    assert caught.value.name == "clusters[0]"


def test_two_clusters_may_not_share_a_stack_name() -> None:
    with pytest.raises(SettingsError, match="NodeManager-a-example-com"):
        load_config(
            {
                "clusters": [
                    {"name": "a.example.com", "agent_trust_account": True},
                    {"name": "a-example.com", "agent_trust_account": True},
                ]
            }
        )


def test_context_given_as_a_json_string_on_the_command_line() -> None:
    config = load_config(
        {
            "clusters": json.dumps(
                [{"name": "dev.k8s.local", "agent_trust_account": True, "lambda_architecture": "x86_64"}]
            )
        }
    )
    assert config.clusters[0].lambda_architecture is Architecture.X86_64


def test_irsa_audience_defaults_to_kops_and_may_be_the_eks_one() -> None:
    # kOps' IAM OIDC provider lists only the client ID "amazonaws.com" (kops pkg/model/awsmodel/oidc_provider.go)
    assert load_config(clusters()).clusters[0].irsa_audience == "amazonaws.com"
    assert load_config(clusters(irsa_audience="sts.amazonaws.com")).clusters[0].irsa_audience == "sts.amazonaws.com"


def test_oidc_issuer_comes_from_the_provider_arn() -> None:
    cluster = load_config(
        clusters(agent_oidc_provider_arn="arn:aws:iam::111122223333:oidc-provider/oidc.example.com/id/ABC")
    ).clusters[0]
    assert cluster.oidc_issuer == "oidc.example.com/id/ABC"


def test_lambda_environment_uses_the_lambdas_own_names_and_validates_there() -> None:
    cluster = load_config(
        clusters(
            rebalance_policy="drain",
            spot_deadline_seconds=90,
            early_replacement=False,
            rebalance_drain_timeout_seconds=300,
            dry_run=True,
        )
    ).clusters[0]
    env = cluster.interruption_environment(table_name="t", queue_url="https://q", idempotency_table_name="i")
    assert set(env) <= set(InterruptionSettings.ENV_VARS.values())
    settings = InterruptionSettings.from_env(env)
    assert (settings.cluster_name, settings.table_name, settings.queue_url, settings.idempotency_table_name) == (
        "dev.k8s.local",
        "t",
        "https://q",
        "i",
    )
    assert settings.rebalance_policy is RebalancePolicy.DRAIN
    assert settings.spot_deadline_seconds == 90
    assert settings.early_replacement is False
    assert settings.rebalance_drain_timeout_seconds == 300
    assert settings.dry_run is True


def test_lambda_settings_default_as_in_the_lambda() -> None:
    cluster = load_config(clusters()).clusters[0]
    env = cluster.interruption_environment(table_name="t", queue_url="q", idempotency_table_name="i")
    from_deploy = InterruptionSettings.from_env(env)
    lambda_defaults = InterruptionSettings(
        cluster_name="dev.k8s.local", table_name="t", queue_url="q", idempotency_table_name="i"
    )
    assert from_deploy == lambda_defaults


def test_bounds_follow_the_lambda_settings() -> None:
    """A deadline the Lambda would refuse at start is refused at synth, with the same bound."""
    upper = next(m.le for m in InterruptionSettings.model_fields["spot_deadline_seconds"].metadata if hasattr(m, "le"))
    assert (
        ClusterConfig(name="a.b", agent_trust_account=True, spot_deadline_seconds=upper).spot_deadline_seconds == upper
    )
    with pytest.raises(ValidationError):
        ClusterConfig(name="a.b", agent_trust_account=True, spot_deadline_seconds=upper + 1)


def test_build_app_refuses_bad_context_before_building_anything(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        build_app(clusters(log_retention_days=2), outdir=str(tmp_path))
    assert caught.value.name == "clusters[0].log_retention_days"


def test_an_agent_role_without_a_trust_is_refused_with_what_to_set() -> None:
    with pytest.raises(SettingsError) as info:
        load_config({"clusters": [{"name": "dev.k8s.local"}]})
    assert "agent_oidc_provider_arn" in str(info.value) and "agent_role_arn" in str(info.value)
    assert info.value.name == "clusters[0]"


def test_the_capacity_lambdas_get_their_timeout_and_the_lease_is_checked_at_synth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import infra.config
    from core.settings import RefresherSettings, ReplenisherSettings

    cluster = load_config(clusters()).clusters[0]
    replenisher = ReplenisherSettings.from_env(cluster.replenisher_environment(table_name="t", queue_url="q"))
    refresher = RefresherSettings.from_env(cluster.refresher_environment(table_name="t", queue_url="q"))
    assert replenisher.function_timeout_seconds == infra.config.REPLENISHER_TIMEOUT_SECONDS
    assert refresher.function_timeout_seconds == infra.config.REFRESHER_TIMEOUT_SECONDS
    # a function timeout the default lease (120 s) cannot cover is refused at synth, naming the Lambda's variable
    monkeypatch.setattr(infra.config, "REPLENISHER_TIMEOUT_SECONDS", 100)
    with pytest.raises(SettingsError) as info:
        load_config(clusters())
    assert info.value.name == "clusters[0]" and "LOCK_LEASE_SECONDS" in str(info.value)


def test_the_manual_request_bounds_reach_the_refresher() -> None:
    from core.settings import RefresherSettings

    default = load_config(clusters()).clusters[0]
    settings = RefresherSettings.from_env(default.refresher_environment(table_name="t", queue_url="q"))
    assert (settings.request_max_surge, settings.request_min_drain_timeout_seconds) == (3, 120)
    assert settings.request_allow_terminate is False
    context = clusters()
    context["clusters"][0].update(
        refresh_request_max_surge=5,
        refresh_request_min_drain_timeout_seconds=30,
        refresh_request_allow_terminate=True,
    )
    lenient = load_config(context).clusters[0]
    settings = RefresherSettings.from_env(lenient.refresher_environment(table_name="t", queue_url="q"))
    assert (settings.request_max_surge, settings.request_min_drain_timeout_seconds) == (5, 30)
    assert settings.request_allow_terminate is True
