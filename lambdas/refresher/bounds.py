"""What the settings bound a refresh by. Pure.

- ``capacity_bounds``: the limits the executor clamps each group's sizes to (``core.capacity.Bounds``), from what
  Auto Scaling reported this pass and the settings;
- ``request_refusals``: a manual request asking for more surge, a shorter drain timeout or the ``terminate`` policy
  than the settings allow is refused before anything is planned.

A group the run surges may reach at most its original MaxSize plus the settings' surge limit
(``RefresherSettings.surge_limit``; ``core.capacity.surge_bounds``); the original MaxSize is the one the ``RUN#``
item recorded, never more than the MaxSize Auto Scaling reports now, so a forged run can lower the limit, not raise
it. Only the run's own groups get bounds: a ``SetCapacity`` for any other group is not applied.
"""

from __future__ import annotations

from core.capacity import Bounds, surge_bounds
from core.runs import DrainTimeoutPolicy, Run
from core.settings import RefresherSettings
from lambdas.events.request import RefreshRequest
from lambdas.refresher.world import World


def capacity_bounds(run: Run, world: World, settings: RefresherSettings) -> dict[str, Bounds]:
    """Group name -> ``Bounds`` for every group of ``run`` that Auto Scaling reported in ``world``."""
    out = {}
    for group in run.groups:
        facts = world.groups.get(group.name)
        if facts is None:
            continue
        out[group.name] = surge_bounds(
            group.name, facts.min_size, group.original_max, facts.max_size, settings.surge_limit
        )
    return out


def request_refusals(request: RefreshRequest, settings: RefresherSettings) -> list[str]:
    """Why a manual refresh request asks for more than the settings allow (one ``field: message`` each; empty: within
    bounds). A request may ask for:

    - ``max_surge`` up to ``RefresherSettings.surge_limit`` (the larger of ``REFRESH_REQUEST_MAX_SURGE`` and
      ``REFRESH_MAX_SURGE``);
    - ``drain_timeout`` down to the smaller of ``REFRESH_REQUEST_MIN_DRAIN_TIMEOUT_SECONDS`` and
      ``REFRESH_DRAIN_TIMEOUT_SECONDS``;
    - ``drain_timeout_policy`` ``terminate`` only with ``REFRESH_REQUEST_ALLOW_TERMINATE`` (or when it is the settings'
      own ``REFRESH_DRAIN_TIMEOUT_POLICY``).
    """
    out = []
    if request.max_surge is not None and request.max_surge > settings.surge_limit:
        out.append(
            f"max_surge: {request.max_surge} is above the {settings.surge_limit} the settings allow "
            "(REFRESH_REQUEST_MAX_SURGE, REFRESH_MAX_SURGE)"
        )
    shortest = min(settings.request_min_drain_timeout_seconds, settings.drain_timeout_seconds)
    seconds = request.drain_timeout_seconds
    if seconds is not None and seconds < shortest:
        out.append(
            f"drain_timeout: {seconds} s is shorter than the {shortest} s the settings allow "
            "(REFRESH_REQUEST_MIN_DRAIN_TIMEOUT_SECONDS)"
        )
    policy = request.drain_timeout_policy
    if (
        policy is DrainTimeoutPolicy.TERMINATE
        and not settings.request_allow_terminate
        and settings.drain_timeout_policy is not DrainTimeoutPolicy.TERMINATE
    ):
        out.append(
            "drain_timeout_policy: 'terminate' is not allowed in a request by the settings "
            "(REFRESH_REQUEST_ALLOW_TERMINATE=false)"
        )
    return out
