"""The loop every Lambda's executor runs: apply the actions in order, dry-run, one log line and one result each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar


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
