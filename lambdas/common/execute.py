"""The loop every Lambda's executor runs: apply the actions in order, dry-run, one log line and one result each; and
the bounded resize both capacity executors make (``set_bounded_capacity``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from adapters.aws.ports import AwsPort
from core.capacity import Bounds, clamp
from lambdas.common.telemetry import Telemetry


class Describable(Protocol):
    def describe(self) -> str: ...


A = TypeVar("A", bound=Describable)


def apply_in_order(
    actions: Sequence[A],
    apply: Callable[[A], str],
    *,
    effects: tuple[type, ...],
    logger: Any,
    dry_run: bool,
    after_action: Callable[[A], None] | None = None,
) -> list[dict[str, str]]:
    """Apply ``actions`` in order with ``apply`` (which returns what happened), logging each.

    Args:
        effects: the action types that change something; under ``dry_run`` they are not applied (their result is
            ``"dry run: not done"``), the others (notes, acknowledgements) still are.
        logger: a Powertools ``Logger`` (or a ``logging.Logger``); one line per action, with ``action`` (the type's
            name) and ``result`` keys.
        after_action: called with each action once it was applied (not under ``dry_run``); tests inject a crash.

    Returns:
        One ``{"action": <description>, "result": <what happened>}`` per action applied, in order.

    Raises:
        Whatever ``apply`` raises: the actions after it are not applied.
    """
    results: list[dict[str, str]] = []
    for action in actions:
        result = "dry run: not done" if dry_run and isinstance(action, effects) else apply(action)
        logger.info(f"{action.describe()}: {result}", extra={"action": type(action).__name__, "result": result})
        results.append({"action": action.describe(), "result": result})
        if after_action is not None and not dry_run:
            after_action(action)
    return results


class CapacityEffects(Protocol):
    """What a capacity executor's ``Effects`` offers ``set_bounded_capacity``."""

    @property
    def aws(self) -> AwsPort: ...

    @property
    def telemetry(self) -> Telemetry: ...

    @property
    def logger(self) -> Any: ...


def set_bounded_capacity(
    effects: CapacityEffects, asg_name: str, desired: int | None, max_size: int | None, bounds: Bounds
) -> str:
    """UpdateAutoScalingGroup of ``asg_name`` with the sizes asked, clamped to ``bounds`` first
    (``core.capacity.clamp``, DESIGN.md invariant 9): a clamp is counted (``CapacityClamped``) and logged as a
    warning with what was asked.

    Returns:
        What happened, for the action's result: ``updated``, or ``updated, clamped to ...`` with the reasons.

    Raises:
        What ``AutoScalingPort.set_capacity`` raises (AwsUnavailableError, AwsRequestError).
    """
    sizes = clamp(desired, max_size, bounds)
    if sizes.clamped:
        effects.telemetry.count("CapacityClamped")
        effects.logger.warning(
            f"{asg_name}: sizes clamped: {'; '.join(sizes.reasons)}",
            extra={"asg_name": asg_name, "asked_desired": desired, "asked_max_size": max_size},
        )
    effects.aws.autoscaling.set_capacity(asg_name, sizes.desired, sizes.max_size)
    if sizes.clamped:
        return f"updated, clamped to desired {sizes.desired} and MaxSize {sizes.max_size}: {'; '.join(sizes.reasons)}"
    return "updated"
