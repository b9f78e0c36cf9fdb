"""The user's settings in the scenarios: the variables of the README's settings table set in the environment of
``make demo`` / ``python -m scenarios`` reach the Lambdas and the agent the scenario runs, validated the way the
deployed code validates them (``core.settings``; a bad value is a ``SettingsError`` naming the variable).

What the local world owns (the cluster's name, table, queue, bus, account: ``ClusterInfo.env``) is not taken from the
environment: the scenario's cluster is the one it just made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from core.settings import AgentSettings, InterruptionSettings, RefresherSettings, ReplenisherSettings

# Set by the world for its cluster (``localworld.cluster.ClusterInfo.env``); a user's value would point elsewhere.
WORLD_OWNED = frozenset(
    {"CLUSTER_NAME", "TABLE_NAME", "QUEUE_URL", "IDEMPOTENCY_TABLE_NAME", "EVENT_BUS_NAME", "ACCOUNT_ID"}
)

# Stand-ins for the world-owned variables when the settings are checked before the world exists.
_PLACEHOLDERS = {
    "CLUSTER_NAME": "demo.k8s.local",
    "TABLE_NAME": "node-manager",
    "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/node-manager",
    "IDEMPOTENCY_TABLE_NAME": "node-manager-idempotency",
    "EVENT_BUS_NAME": "default",
    "ACCOUNT_ID": "123456789012",
}

SettingsClass = type[InterruptionSettings] | type[ReplenisherSettings] | type[RefresherSettings] | type[AgentSettings]
DEPLOYABLES: tuple[SettingsClass, ...] = (InterruptionSettings, ReplenisherSettings, RefresherSettings, AgentSettings)


def user_settings(settings: SettingsClass, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``settings`` (``ENV_VARS``) set in ``environ`` (default ``os.environ``), except what the
    world owns."""
    env = os.environ if environ is None else environ
    return {
        var: env[var] for var in settings.ENV_VARS.values() if var not in WORLD_OWNED and env.get(var) not in (None, "")
    }


def settings_env(
    settings: SettingsClass,
    world: Mapping[str, str],
    scenario: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a deployable gets in a scenario: the scenario's own defaults, then the user's settings, then
    what the world owns (``world``: ``ClusterInfo.env()``)."""
    return {**(scenario or {}), **user_settings(settings, environ), **world}


def check_user_settings(environ: Mapping[str, str] | None = None) -> None:
    """Validate the user's settings for every deployable before a scenario starts anything.

    Raises:
        SettingsError: a value does not validate (the message names the variable).
    """
    for settings in DEPLOYABLES:
        settings.from_env(settings_env(settings, _PLACEHOLDERS, environ=environ))
