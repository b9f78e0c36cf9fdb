"""Shared parts of the settings: the env-reading base class, enums, the variables every deployable reads, and
``parse_duration``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from core.exceptions import SettingsError


class LogFormat(str, Enum):
    """``LOG_FORMAT`` of the agent (``agent.logs``): one JSON object per line, or human-readable text."""

    JSON = "json"
    TEXT = "text"


class RebalancePolicy(str, Enum):
    """What to do on an "EC2 Instance Rebalance Recommendation" (a Spot instance at elevated risk).

    - ``ignore``: acknowledge only.
    - ``cordon``: cordon the node so no new pods land there (what aws-node-termination-handler does when
      rebalance monitoring is enabled).
    - ``drain``: cordon and drain it now, with ``REBALANCE_DRAIN_TIMEOUT_SECONDS``.
    - ``replace``: cordon it, and replace it surge first (a spare launched in its ASG, Ready, then the node drained
      and the instance terminated with decrement) through a one-instance refresh run started by the interruption
      Lambda (``lambdas.interruption.decide.rebalance``); where a replacement may not start (a control-plane node,
      another run active, ``REBALANCE_REPLACE_LIMIT`` reached) the cordon alone stays, as under ``cordon``.
    """

    IGNORE = "ignore"
    CORDON = "cordon"
    DRAIN = "drain"
    REPLACE = "replace"


class PdbDeadlinePolicy(str, Enum):
    """``DRAIN_PDB_DEADLINE_POLICY``: what a deadline-bound drain (Spot warning, termination lifecycle hook: the
    instance goes at the deadline whatever the drain did) does with a pod a PodDisruptionBudget still protects.

    - ``honor``: keep retrying the eviction until the deadline; the reclaim then kills the pod without a shutdown.
    - ``delete``: once the pod's grace period no longer fits before the deadline (minus
      ``DRAIN_GRACE_MARGIN_SECONDS``), DELETE it with the grace that remains, so it gets SIGTERM and stops
      cleanly (Karpenter's ``terminationGracePeriod`` does the same).
    """

    HONOR = "honor"
    DELETE = "delete"


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # name of the field -> environment variable
    ENV_VARS: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Any:
        """Build the settings from ``environ`` (default ``os.environ``).

        Raises:
            SettingsError: a required variable is missing or a value does not validate.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, var in cls.ENV_VARS.items():
            raw = env.get(var)
            if raw is not None and raw != "":
                values[field] = raw
        try:
            return cls(**values)
        except ValidationError as err:
            first = err.errors()[0]
            loc = first["loc"][0] if first["loc"] else ""
            var = cls.ENV_VARS.get(str(loc), str(loc)) if loc else "settings"
            raise SettingsError(var, first["msg"]) from err


_COMMON_ENV = {
    "cluster_name": "CLUSTER_NAME",
    "table_name": "TABLE_NAME",
    "queue_url": "QUEUE_URL",
}

# The Lambdas' own: the account they run in, for running outside Lambda (in Lambda the invocation context's function
# ARN names it and wins). Without either, no event from the bus is acted on (``lambdas.events.scope``).
_LAMBDA_ENV = {"account_id": "ACCOUNT_ID"}
# The capacity Lambdas' (replenisher, refresher) function timeout, set by the stack so the lock lease is checked
# against it when the settings load (core.lock.lease_too_short).
_TIMEOUT_ENV = {"function_timeout_seconds": "FUNCTION_TIMEOUT_SECONDS"}
ACCOUNT_ID_PATTERN = r"^\d{12}$"


_DURATION_RE = re.compile(
    r"^(?:(?P<w>\d+)w)?(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?\Z", re.ASCII
)
_DURATION_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
# the longest maximum age (a century: "never by age"); a run's options are stored in its RUN# item, whose numbers
# DynamoDB holds to 38 digits (boto3 refuses more, ``decimal.Rounded``, before any call)
MAX_AGE_LIMIT_SECONDS = 36500 * 86400


def check_max_age(text: str | int) -> int:
    """Seconds in a maximum age (``parse_duration``), at most ``MAX_AGE_LIMIT_SECONDS``.

    Raises:
        ValueError: not a duration, zero, or longer than a century.
    """
    seconds = parse_duration(text)
    if seconds > MAX_AGE_LIMIT_SECONDS:
        raise ValueError(f"max age {text!r} is longer than {MAX_AGE_LIMIT_SECONDS // 86400}d")
    return seconds


def parse_duration(text: str | int) -> int:
    """Seconds in a duration such as ``7d``, ``168h``, ``1d12h``, ``90m``, ``3600s`` or a bare number of seconds.

    >>> parse_duration("7d"), parse_duration("168h"), parse_duration("1w"), parse_duration(90)
    (604800, 604800, 604800, 90)

    Raises:
        ValueError: not such a duration, or zero.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        seconds = text
    else:
        raw = str(text).strip().lower()
        if raw.isascii() and raw.isdigit():
            seconds = int(raw)
        else:
            match = _DURATION_RE.fullmatch(raw)
            if not raw or match is None:
                raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 168h, 1d12h, 90m)")
            seconds = sum(int(v) * _DURATION_UNITS[k] for k, v in match.groupdict().items() if v)
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return seconds
