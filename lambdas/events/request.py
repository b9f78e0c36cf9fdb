"""Direct invocations of the refresher (no EventBridge envelope, no ``source``): the rules' constant inputs and
the manual requests.

The refresher's two rules send a constant input (infra/refresher.py), exactly one key::

    {"trigger": "schedule"}     # the weekly schedule: start a run with the settings' defaults  -> kind ``schedule``
    {"trigger": "tick"}         # the periodic tick: advance the active run                      -> kind ``tick``

Manual requests are the ``aws lambda invoke`` payloads (also what the CLI sends) -> kind ``request``.

Start a refresh (every field but ``cluster`` optional; defaults from ``RefresherSettings``)::

    {"action": "refresh", "cluster": "demo.k8s.local",
     "instance_groups": ["nodes-us-east-1a"],       # kops.k8s.io/instancegroup values or ASG names; all if absent
     "max_age": "7d",                               # replace instances launched longer ago (or outdated template)
     "all": false,                                  # true: replace every instance (exclusive with max_age)
     "dry_run": false, "max_surge": 1, "drain_timeout": "10m", "drain_timeout_policy": "pause"}

Status and cancel::

    {"action": "status", "cluster": "demo.k8s.local"}
    {"action": "status", "cluster": "demo.k8s.local", "run_id": "20240101T000000Z-ab12cd"}  # + that run's RUN# record
    {"action": "cancel", "cluster": "demo.k8s.local", "run_id": "20240101T000000Z-ab12cd"}   # run_id optional

Anything else is refused with ``InvalidRequestError`` naming each field at fault. A well-formed refresh request is
also refused when it asks for more than the refresher's settings allow (a larger ``max_surge``, a shorter
``drain_timeout``, the ``terminate`` policy: ``lambdas.refresher.bounds.request_refusals``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.exceptions import InvalidRequestError, MalformedEventError
from core.runs import DrainTimeoutPolicy
from core.settings import check_max_age, parse_duration

# a name given must name something: an empty one is refused, not read as "none given"
Name = Annotated[str, Field(min_length=1)]


class RefreshRequest(BaseModel):
    """Start a refresh run (or, with ``dry_run``, only show its plan)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["refresh"] = "refresh"
    cluster: str = Field(min_length=1)
    instance_groups: tuple[Name, ...] | None = Field(default=None, min_length=1)
    max_age: str | None = None
    all: bool = False
    dry_run: bool = False
    max_surge: int | None = Field(default=None, ge=1, le=100)
    drain_timeout: str | int | None = None
    drain_timeout_policy: DrainTimeoutPolicy | None = None

    @field_validator("max_age")
    @classmethod
    def _max_age(cls, value: str | None) -> str | None:
        if value is not None:
            check_max_age(value)  # at most a century: a run's options are stored in its RUN# item
        return value

    @field_validator("drain_timeout")
    @classmethod
    def _drain_timeout(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            seconds = parse_duration(value)
            if seconds < 10 or seconds > 86400:
                raise ValueError("must be between 10 s and 1 day")
        return value

    @model_validator(mode="after")
    def _selection(self) -> RefreshRequest:
        if self.all and self.max_age is not None:
            raise ValueError("give either max_age or all, not both")
        return self

    @property
    def drain_timeout_seconds(self) -> int | None:
        return None if self.drain_timeout is None else parse_duration(self.drain_timeout)


class StatusRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["status"]
    cluster: str = Field(min_length=1)
    limit: int = Field(default=5, ge=1, le=50)
    # this run, with its whole RUN# record (``run_record``), instead of the newest
    run_id: str | None = Field(default=None, min_length=1)


class CancelRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["cancel"]
    cluster: str = Field(min_length=1)
    # absent: the active run; never empty (``""`` would otherwise cancel whatever run is active)
    run_id: str | None = Field(default=None, min_length=1)


Request = RefreshRequest | StatusRequest | CancelRequest
_MODELS: dict[str, type[RefreshRequest] | type[StatusRequest] | type[CancelRequest]] = {
    "refresh": RefreshRequest,
    "status": StatusRequest,
    "cancel": CancelRequest,
}


def parse_request(payload: Any) -> Request:
    """Validate a manual payload.

    Raises:
        InvalidRequestError: not an object, an unknown ``action``, or fields that do not validate (``errors``
            lists them as ``field: message``).
    """
    if not isinstance(payload, dict):
        raise InvalidRequestError(
            f"request must be a JSON object, not {type(payload).__name__}", ["request: not an object"]
        )
    action = payload.get("action", "refresh")
    model = _MODELS.get(action) if isinstance(action, str) else None
    if model is None:
        raise InvalidRequestError(
            f"unknown action {action!r}; use one of {sorted(_MODELS)}", [f"action: unknown {action!r}"]
        )
    try:
        request: Request = model.model_validate(payload)
    except ValidationError as err:
        errors = [f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in err.errors()]
        raise InvalidRequestError(f"invalid {action} request: {'; '.join(errors)}", errors) from err
    return request


class Marker(str, Enum):
    """A rule's constant input ``{"trigger": <marker>}``."""

    SCHEDULE = "schedule"
    TICK = "tick"


def read_direct(payload: Mapping[str, Any]) -> Marker | Request:
    """Read a direct invocation (an object without ``source``): a rule's constant input or a manual request.

    Raises:
        MalformedEventError: ``trigger`` with another key beside it, or an unknown ``trigger``.
        InvalidRequestError: a manual request that does not validate (see ``parse_request``).
    """
    marker = payload.get("trigger")
    if marker is not None and set(payload) != {"trigger"}:
        # The rules send exactly {"trigger": ...}; anything beside it is a hand-made payload gone wrong
        # (e.g. {"trigger": "schedule", "dry_run": true} would otherwise start a real run).
        extra = sorted(str(k) for k in payload if k != "trigger")
        raise MalformedEventError(f"unexpected keys beside 'trigger': {', '.join(extra)[:200]}")
    if marker is None:
        return parse_request(dict(payload))
    if marker in (Marker.SCHEDULE.value, Marker.TICK.value):
        return Marker(marker)
    raise MalformedEventError(f"unknown trigger {marker!r} (expected 'schedule' or 'tick')")
