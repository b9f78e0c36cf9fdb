"""The deployment settings, read from the CDK context (``cdk.json`` → ``"context"``) and validated once.

Shape of the context (every key but ``clusters[].name`` optional)::

    {
      "clusters": [
        {
          "name": "prod.k8s.example.com",           # the kOps cluster name (the KubernetesCluster tag value)
          "account": "111122223333",                # else CDK_DEFAULT_ACCOUNT / env-agnostic
          "region": "eu-west-1",                    # else CDK_DEFAULT_REGION / env-agnostic
          "rebalance_policy": "cordon",             # ignore | cordon | drain | replace (core.settings.RebalancePolicy)
          "spot_deadline_seconds": 120,             # seconds from the warning to the reclaim
          "early_replacement": true,                # detach the doomed instance so its ASG launches a replacement
          "rebalance_drain_timeout_seconds": 600,   # drain deadline with rebalance_policy "drain"
          "rebalance_quiet_seconds": 1800,          # a rebalance cordon nothing followed is given back after this
          "rebalance_replace_limit": 1,             # rebalance_policy "replace": instances replaced at once
          "rebalance_max_cordoned_percent": 20,     # cordon / drain: share of the nodes cordoned for rebalance at once
          "dry_run": false,                         # the Lambda plans and logs only
          "lambda_architecture": "arm64",           # arm64 | x86_64
          "log_retention_days": 30,                 # one of CloudWatch Logs' allowed values
          "log_level": "INFO",
          "reserved_concurrency": 5,                # 0: no reservation (see ClusterConfig)
          "tracing": false,                         # X-Ray active tracing on the Lambda
          "encryption": "aws-managed",              # aws-managed | kms (one customer managed key, rotated)
          "event_retry_attempts": 3,                # EventBridge target retry policy
          "event_max_age_seconds": 120,             #   (an interruption warning is worthless after ~2 minutes)
          "agent_oidc_provider_arn": null,          # IRSA: arn:aws:iam::<account>:oidc-provider/<issuer>
          "agent_service_account": "node-manager:agent",
          "irsa_audience": "amazonaws.com",         # the token audience IRSA trusts (kOps; EKS: sts.amazonaws.com)
          "agent_role_arn": null,                   # use this existing role for the agent instead of creating one
          "agent_trust_account": false,             # neither of the two: let the account assume it (development only)
          "refresh_schedule": "cron(0 3 ? * SUN *)", # the weekly refresh (EventBridge cron/rate expression, UTC)
          "refresh_tick_minutes": 5,                # the refresher's safety-net tick
          "max_group_size": 200,                    # IAM: no Lambda may set a group's MaxSize above this
          "refresh_max_age": "7d",                  # the weekly run replaces instances older than this
          "refresh_max_surge": 1,
          "refresh_drain_timeout_seconds": 600,
          "refresh_drain_timeout_policy": "pause",  # pause | terminate (core.runs.DrainTimeoutPolicy)
          "refresh_request_max_surge": 3,           # what a manual request may ask for at most / at least
          "refresh_request_min_drain_timeout_seconds": 120,
          "refresh_request_allow_terminate": false, #   and whether it may ask for the terminate policy
          "lifecycle_hooks": true,                  # the replenisher hooks every group tagged for the cluster
          "lifecycle_hook_groups": [],              # optional: ASG names CloudFormation hooks at deploy time
          "lifecycle_hook_heartbeat_seconds": 300,  # the hook's HeartbeatTimeout (the agent beats every 60 s)
          "lock_alarm_seconds": 14400,              # LockHeldTooLong threshold
          "agent_silent_minutes": 10,               # AgentSilent window
          "alarm_topic_arn": null,                  # alarms notify this existing SNS topic, or
          "create_alarm_topic": false               # a new topic the stack creates (subscribe to it yourself)
        }
      ]
    }

A bad value raises ``core.exceptions.SettingsError`` whose ``name`` is the context key path, e.g.
``clusters[0].spot_deadline_seconds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.exceptions import SettingsError
from core.settings import InterruptionSettings, RebalancePolicy, RefresherSettings, ReplenisherSettings
from infra.formats import (
    CLUSTER_NAME_RE,
    LOG_RETENTION_DAYS,
    OIDC_PROVIDER_ARN_RE,
    ROLE_ARN_RE,
    SERVICE_ACCOUNT_RE,
)
from infra.schedule import validate_schedule

# The audience of the agent's service-account token that its IRSA role trusts by default: kOps' IAM OIDC provider has
# the client ID "amazonaws.com" and its pod-identity-webhook runs with --token-audience=amazonaws.com (kops
# pkg/model/awsmodel/oidc_provider.go, defaultAudience). EKS uses "sts.amazonaws.com".
IRSA_AUDIENCE = "amazonaws.com"

CONTEXT_KEY = "clusters"
# The capacity Lambdas' timeouts (seconds; infra/replenisher.py and infra/refresher.py give them to the functions).
# Each function's settings get its own as FUNCTION_TIMEOUT_SECONDS, so its lock lease is checked against it at synth
# and when the Lambda loads its settings (core.lock.lease_too_short).
REPLENISHER_TIMEOUT_SECONDS = 60
REFRESHER_TIMEOUT_SECONDS = 120
# Cluster settings passed to the interruption Lambda as they are (same names as InterruptionSettings' fields).
LAMBDA_SETTINGS = (
    "spot_deadline_seconds",
    "early_replacement",
    "rebalance_policy",
    "rebalance_drain_timeout_seconds",
    "rebalance_quiet_seconds",
    "rebalance_replace_limit",
    "rebalance_max_cordoned_percent",
    "dry_run",
)


def _as_in_lambda(field: str) -> Any:
    """The type of ``InterruptionSettings.<field>`` with its bounds, so a bad value fails here, named."""
    info = InterruptionSettings.model_fields[field]
    return Annotated[(info.annotation, *info.metadata)]


class Architecture(str, Enum):
    """The Lambda's instruction set (``Architectures`` of AWS::Lambda::Function)."""

    ARM64 = "arm64"
    X86_64 = "x86_64"


class Encryption(str, Enum):
    """How the table and the queues are encrypted at rest.

    - ``aws-managed``: DynamoDB's AWS managed key and SSE-SQS (no key to pay for or manage).
    - ``kms``: one customer managed KMS key per stack, with yearly rotation.
    """

    AWS_MANAGED = "aws-managed"
    KMS = "kms"


class ClusterConfig(BaseModel):
    """One cluster's deployment: becomes one stack."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    # These share name, type, bounds and default with core.settings.InterruptionSettings (LAMBDA_SETTINGS).
    rebalance_policy: RebalancePolicy = InterruptionSettings.model_fields["rebalance_policy"].default
    spot_deadline_seconds: _as_in_lambda("spot_deadline_seconds") = (  # type: ignore[valid-type]  # type built at import from the Lambda's field
        InterruptionSettings.model_fields["spot_deadline_seconds"].default
    )
    early_replacement: bool = InterruptionSettings.model_fields["early_replacement"].default
    rebalance_drain_timeout_seconds: _as_in_lambda("rebalance_drain_timeout_seconds") = (  # type: ignore[valid-type]  # as above
        InterruptionSettings.model_fields["rebalance_drain_timeout_seconds"].default
    )
    rebalance_quiet_seconds: _as_in_lambda("rebalance_quiet_seconds") = (  # type: ignore[valid-type]  # as above
        InterruptionSettings.model_fields["rebalance_quiet_seconds"].default
    )
    rebalance_replace_limit: _as_in_lambda("rebalance_replace_limit") = (  # type: ignore[valid-type]  # as above
        InterruptionSettings.model_fields["rebalance_replace_limit"].default
    )
    rebalance_max_cordoned_percent: _as_in_lambda("rebalance_max_cordoned_percent") = (  # type: ignore[valid-type]  # as above
        InterruptionSettings.model_fields["rebalance_max_cordoned_percent"].default
    )
    dry_run: bool = InterruptionSettings.model_fields["dry_run"].default
    lambda_architecture: Architecture = Architecture.ARM64
    log_retention_days: int = 30
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # 0 means "no reservation": the function then shares the account's unreserved pool. (Lambda's own meaning of a
    # reservation of 0, throttle everything, would switch interruption handling off; and a JSON null cannot carry
    # the meaning either: jsii drops null values from the CDK context.)
    reserved_concurrency: int = Field(default=5, ge=0, le=1000)
    tracing: bool = False
    encryption: Encryption = Encryption.AWS_MANAGED
    event_retry_attempts: int = Field(default=3, ge=0, le=185)  # EventBridge RetryPolicy bounds
    event_max_age_seconds: int = Field(default=120, ge=60, le=86400)
    agent_oidc_provider_arn: str | None = None
    agent_service_account: str = "node-manager:agent"
    # The ``aud`` of the agent's projected token that the role trusts (infra/agent.py): kOps' pod-identity-webhook and
    # IAM OIDC provider use "amazonaws.com"; "sts.amazonaws.com" is EKS' (or a webhook run with that token audience).
    irsa_audience: str = Field(default=IRSA_AUDIENCE, pattern=r"^[A-Za-z0-9][A-Za-z0-9.:/_-]{0,254}$")
    agent_role_arn: str | None = None
    # Without an OIDC provider or an existing role, the agent's role would trust every principal of the account that
    # is allowed sts:AssumeRole on it: refused unless asked for (a development cluster without IRSA).
    agent_trust_account: bool = False
    # The refresher (infra/refresher.py); the run defaults share names and bounds with RefresherSettings.
    # an EventBridge schedule expression, UTC (infra.schedule checks EventBridge's own grammar)
    refresh_schedule: str = "cron(0 3 ? * SUN *)"
    refresh_tick_minutes: int = Field(default=5, ge=1, le=60)
    # IAM denies the replenisher and the refresher any MaxSize above this (bounded replay; infra.permissions)
    max_group_size: int = Field(default=200, ge=1, le=10000)
    refresh_max_age: str = "7d"
    refresh_max_surge: int = Field(default=1, ge=1, le=100)
    refresh_drain_timeout_seconds: int = Field(default=600, ge=10, le=86400)
    refresh_drain_timeout_policy: Literal["pause", "terminate"] = "pause"
    # the bounds of a manual refresh request (lambdas.refresher.bounds.request_refusals)
    refresh_request_max_surge: int = Field(default=3, ge=1, le=100)
    refresh_request_min_drain_timeout_seconds: int = Field(default=120, ge=10, le=86400)
    refresh_request_allow_terminate: bool = False
    # Operations (infra/lifecycle.py, infra/operations.py)
    # The replenisher gives every group tagged KubernetesCluster=<name> the termination hook (new and re-created ones
    # too: lambdas/replenisher/hooks.py); false leaves hooks to the listed groups below (or to nobody).
    lifecycle_hooks: bool = True
    # Groups hooked by CloudFormation at deploy time, by name (optional: the replenisher covers every group by tag
    # within one tick; a group listed here is hooked before the first tick and its hook is removed with the stack).
    lifecycle_hook_groups: tuple[str, ...] = ()
    lifecycle_hook_heartbeat_seconds: int = Field(default=300, ge=30, le=7200)  # Auto Scaling's bounds
    lock_alarm_seconds: int = Field(default=4 * 3600, ge=300)
    agent_silent_minutes: int = Field(default=10, ge=5, le=1440)
    alarm_topic_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$")
    create_alarm_topic: bool = False

    @field_validator("name")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        if not CLUSTER_NAME_RE.match(value):
            raise ValueError("must be a kOps cluster name (lowercase DNS name, e.g. prod.k8s.example.com)")
        return value

    @field_validator("refresh_schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        try:
            return validate_schedule(value)
        except ValueError as err:
            raise ValueError(f"refresh_schedule: not an EventBridge schedule expression (UTC): {err}") from err

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"must be one of CloudWatch Logs' retention periods {list(LOG_RETENTION_DAYS)}")
        return value

    @field_validator("agent_oidc_provider_arn")
    @classmethod
    def _oidc_arn(cls, value: str | None) -> str | None:
        if value is not None and not OIDC_PROVIDER_ARN_RE.match(value):
            raise ValueError("must be an IAM OIDC provider ARN, arn:aws:iam::<account>:oidc-provider/<issuer>")
        return value

    @field_validator("agent_role_arn")
    @classmethod
    def _role_arn(cls, value: str | None) -> str | None:
        if value is not None and not ROLE_ARN_RE.match(value):
            raise ValueError("must be an IAM role ARN, arn:aws:iam::<account>:role/<name>")
        return value

    @field_validator("agent_service_account")
    @classmethod
    def _service_account(cls, value: str) -> str:
        if not SERVICE_ACCOUNT_RE.match(value):
            raise ValueError("must be <namespace>:<service account name>")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ClusterConfig:
        if self.alarm_topic_arn is not None and self.create_alarm_topic:
            raise ValueError("alarm_topic_arn and create_alarm_topic are exclusive")
        if self.agent_role_arn is not None and self.agent_oidc_provider_arn is not None:
            raise ValueError(
                "agent_role_arn and agent_oidc_provider_arn are exclusive: an existing role keeps its own trust policy"
            )
        if self.agent_role_arn is None and self.agent_oidc_provider_arn is None and not self.agent_trust_account:
            raise ValueError(
                "the agent's role needs a trust: set agent_oidc_provider_arn (IRSA: only the agent's service account "
                "may assume it) or agent_role_arn (an existing role); agent_trust_account: true lets every principal "
                "of the account allowed sts:AssumeRole assume it instead (development only)"
            )
        try:
            RefresherSettings.from_env(self.refresher_environment(table_name="synth-check", queue_url="synth-check"))
        except SettingsError as err:
            raise ValueError(f"refresher: {err}") from err
        try:
            ReplenisherSettings.from_env(
                self.replenisher_environment(table_name="synth-check", queue_url="synth-check")
            )
        except SettingsError as err:
            raise ValueError(f"replenisher: {err}") from err
        # The Lambda validates its environment with the same model when it starts: fail at synth instead.
        try:
            InterruptionSettings.from_env(
                self.interruption_environment(
                    table_name="synth-check", queue_url="synth-check", idempotency_table_name="synth-check"
                )
            )
        except SettingsError as err:
            field = {var: name for name, var in InterruptionSettings.ENV_VARS.items()}.get(err.name, err.name)
            raise ValueError(f"{field}: {err}") from err
        return self

    def refresher_environment(self, *, table_name: str, queue_url: str) -> dict[str, str]:
        """The refresher Lambda's settings as environment variables (names from ``RefresherSettings``)."""
        return {
            "CLUSTER_NAME": self.name,
            "TABLE_NAME": table_name,
            "QUEUE_URL": queue_url,
            "REFRESH_MAX_AGE": self.refresh_max_age,
            "REFRESH_MAX_SURGE": str(self.refresh_max_surge),
            "REFRESH_DRAIN_TIMEOUT_SECONDS": str(self.refresh_drain_timeout_seconds),
            "REFRESH_DRAIN_TIMEOUT_POLICY": self.refresh_drain_timeout_policy,
            "REFRESH_REQUEST_MAX_SURGE": str(self.refresh_request_max_surge),
            "REFRESH_REQUEST_MIN_DRAIN_TIMEOUT_SECONDS": str(self.refresh_request_min_drain_timeout_seconds),
            "REFRESH_REQUEST_ALLOW_TERMINATE": str(self.refresh_request_allow_terminate).lower(),
            # held for one pass of one invocation (DESIGN.md): the function timeout + 30 s at least
            "REFRESH_LOCK_LEASE_SECONDS": str(REFRESHER_TIMEOUT_SECONDS + 60),
            "FUNCTION_TIMEOUT_SECONDS": str(REFRESHER_TIMEOUT_SECONDS),
        }

    def replenisher_environment(self, *, table_name: str, queue_url: str) -> dict[str, str]:
        """The replenisher Lambda's settings as environment variables (names from ``ReplenisherSettings``)."""
        return {
            "CLUSTER_NAME": self.name,
            "TABLE_NAME": table_name,
            "QUEUE_URL": queue_url,
            "DRY_RUN": "true" if self.dry_run else "false",
            "FUNCTION_TIMEOUT_SECONDS": str(REPLENISHER_TIMEOUT_SECONDS),
            "LIFECYCLE_HOOKS": "true" if self.lifecycle_hooks else "false",
            "LIFECYCLE_HOOK_HEARTBEAT_SECONDS": str(self.lifecycle_hook_heartbeat_seconds),
        }

    @property
    def oidc_issuer(self) -> str | None:
        """The issuer (host and path, no scheme) of ``agent_oidc_provider_arn``, e.g. ``oidc.example.com/id/X``."""
        if self.agent_oidc_provider_arn is None:
            return None
        match = OIDC_PROVIDER_ARN_RE.match(self.agent_oidc_provider_arn)
        assert match is not None  # checked by the validator
        return match.group("issuer")

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name: ``NodeManager-<cluster name with dots as dashes>``."""
        return "NodeManager-" + self.name.replace(".", "-")

    def interruption_environment(
        self, *, table_name: str, queue_url: str, idempotency_table_name: str
    ) -> dict[str, str]:
        """The interruption Lambda's settings as environment variables (names from ``InterruptionSettings``).

        ``table_name``/``queue_url``/``idempotency_table_name`` are usually CDK tokens resolved at deploy time.
        """
        values = {
            "cluster_name": self.name,
            "table_name": table_name,
            "queue_url": queue_url,
            "idempotency_table_name": idempotency_table_name,
        }
        for field in LAMBDA_SETTINGS:
            value = getattr(self, field)
            values[field] = (
                ("true" if value else "false")
                if isinstance(value, bool)
                else str(value.value if isinstance(value, Enum) else value)
            )
        return {InterruptionSettings.ENV_VARS[field]: value for field, value in values.items()}


class DeploymentConfig(BaseModel):
    """Every cluster this app deploys (one stack each)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clusters: tuple[ClusterConfig, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> DeploymentConfig:
        seen: set[str] = set()
        for cluster in self.clusters:
            if cluster.stack_name in seen:
                raise ValueError(f"two clusters map to the stack name {cluster.stack_name}")
            seen.add(cluster.stack_name)
        return self


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = CONTEXT_KEY
    for part in loc[1:] if loc and loc[0] == CONTEXT_KEY else loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def load_config(context: Mapping[str, Any]) -> DeploymentConfig:
    """Validate the CDK context into a ``DeploymentConfig``.

    Parameters:
        context: the app's context values (``cdk.json`` ``"context"``, overridden by ``-c`` on the CLI). Only
            the ``clusters`` key is read.

    Raises:
        SettingsError: ``clusters`` is missing, or a value does not validate; ``name`` is the key path, e.g.
            ``clusters[1].log_retention_days``, and the message says what is allowed.

    Example:
        >>> load_config({"clusters": [{"name": "dev.k8s.local"}]}).clusters[0].lambda_architecture.value
        'arm64'
    """
    if CONTEXT_KEY not in context:
        raise SettingsError(CONTEXT_KEY, "missing: set context key 'clusters' in cdk.json (a list of clusters)")
    raw = context[CONTEXT_KEY]
    if isinstance(raw, str):  # `cdk synth -c clusters='[...]'` passes a string
        import json

        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SettingsError(CONTEXT_KEY, f"not valid JSON: {err}") from err
    try:
        return DeploymentConfig.model_validate({CONTEXT_KEY: raw})
    except ValidationError as err:
        first = err.errors()[0]
        raise SettingsError(_key_path(tuple(first["loc"])), first["msg"]) from err
