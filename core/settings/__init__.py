"""Typed settings, read from environment variables when a handler or the agent starts (never at import).

Each deployable has one frozen settings object, validated across fields. Every variable is documented in the
README ("Settings"). A missing or invalid value raises ``SettingsError`` naming the variable.
"""

from core.settings.agent import AgentSettings
from core.settings.base import (
    ACCOUNT_ID_PATTERN,
    MAX_AGE_LIMIT_SECONDS,
    LogFormat,
    PdbDeadlinePolicy,
    RebalancePolicy,
    check_max_age,
    parse_duration,
)
from core.settings.interruption import InterruptionSettings
from core.settings.refresher import RefresherSettings
from core.settings.replenisher import ReplenisherSettings

__all__ = [
    "ACCOUNT_ID_PATTERN",
    "MAX_AGE_LIMIT_SECONDS",
    "AgentSettings",
    "InterruptionSettings",
    "LogFormat",
    "PdbDeadlinePolicy",
    "RebalancePolicy",
    "RefresherSettings",
    "ReplenisherSettings",
    "check_max_age",
    "parse_duration",
]
