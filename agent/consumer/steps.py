"""The two steps of a command through the engine: the fast one (cordon the node, for every drain the moment it is
received) and the slow one (the command itself: the evictions of a drain), each turned into an ``Outcome`` or left
to the next step (see ``agent.consumer``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from agent.consumer.decisions import CONTROL_PLANE_REFUSED, DEADLINE_PASSED, capped, deadline_passed, own_result
from agent.consumer.jobs import Counters, Job
from agent.metrics import AgentMetrics
from agent.report import Outcome
from core.exceptions import (
    ControlPlaneBusyError,
    ControlPlaneRefusedError,
    KubernetesRejectedError,
    NodeNotFoundError,
    RetryableError,
)
from core.model import Command, CommandStatus

log = logging.getLogger(__name__)


class Engine(Protocol):
    """What the consumer needs of ``agent.drain.engine.DrainEngine``."""

    def cordon(self, command: Command, scan: bool = True) -> Any:
        """Find the command's node and cordon it (the fast step of a drain). Raises ``NodeNotFoundError``,
        ``RetryableError``, ``KubernetesRejectedError``."""
        ...

    def run(self, command: Command) -> Any:
        """Execute ``command``; returns a ``NodeCommandResult`` (``.status``: terminal ``CommandStatus``,
        ``.event_posted``, ``.model_dump(mode="json")``). Raises ``NodeNotFoundError``, ``RetryableError``,
        ``KubernetesRejectedError``."""
        ...


def cordon_first(
    engine: Engine,
    command: Command,
    metrics: AgentMetrics | None = None,
    wait_for_node: bool = False,
    scan: bool = True,
    probing: bool = False,
) -> Outcome | None:
    """The fast step of a drain: cordon its node now, before it waits for a drain slot, so no pod evicted elsewhere
    is scheduled onto it. Never raises but as below.

    Returns:
        ``SKIPPED`` when the instance has no node (nothing to drain), ``FAILED`` (``refused``) for a control-plane
        node this command may not touch, else None: cordoned, or the cordon failed (the error is logged and counted
        in ``loop_errors{loop="cordon"}``; the drain step cordons again and decides the command's end from its own
        error).

    Raises:
        ControlPlaneBusyError: a control-plane node whose drain must wait for a slot (left uncordoned).
        NodeNotFoundError: with ``wait_for_node``, the instance has no node yet (the caller waits for it to register;
            its probes pass ``scan`` False but every ``NODE_WAIT_SCAN_EVERY``-th: ``DrainEngine.cordon``).
        RetryableError: with ``probing`` (such a wait under way), a transient error of the probe: the caller probes
            again (returning None would read as "cordoned", and the drain step would find no node and skip).
    """
    try:
        engine.cordon(command, scan=scan)
    except ControlPlaneBusyError:
        raise
    except ControlPlaneRefusedError as err:
        return refused(command, err, metrics)
    except NodeNotFoundError as err:
        if wait_for_node:
            raise
        log.info("no node for the instance, command skipped command_id=%s", command.command_id)
        return skipped(command, str(err))
    except Exception as err:
        if probing and isinstance(err, RetryableError):
            raise
        if metrics is not None:
            metrics.loop_error("cordon", err)
        log.warning(
            "cordon before the drain failed, the drain tries again command_id=%s error=%s: %s",
            command.command_id,
            type(err).__name__,
            err,
            exc_info=True,
        )
    return None


def execute(engine: Engine, command: Command, now: datetime, max_command_seconds: int | None = None) -> Outcome:
    """Run the command through the engine, or decide its end without it (a drain whose deadline passed: its node
    was cordoned by ``cordon_first``, nothing is evicted). A deadline more than ``max_command_seconds`` after ``now``
    is capped there (``decisions.capped``: a far-future deadline cannot hold a drain forever).

    Raises:
        RetryableError: the Kubernetes API failed before any work was done (hand the command back);
            ``ControlPlaneBusyError``: a control-plane drain that must wait for a slot.
    """
    if deadline_passed(command, now):
        log.warning(
            "drain deadline passed before start command_id=%s deadline=%s",
            command.command_id,
            command.deadline.isoformat(),
        )
        return Outcome(
            CommandStatus.TIMED_OUT,
            own_result(command, CommandStatus.TIMED_OUT, DEADLINE_PASSED),
            engine_posted_event=False,
        )
    try:
        bounded = command if max_command_seconds is None else capped(command, now, max_command_seconds)
        if bounded is not command:
            log.warning("deadline capped command_id=%s to=%s", command.command_id, bounded.deadline.isoformat())
        result = engine.run(bounded)
    except NodeNotFoundError as err:
        log.info(
            "no node for the instance, command skipped command_id=%s instance_id=%s",
            command.command_id,
            command.instance_id,
        )
        return skipped(command, str(err))
    except RetryableError:
        raise
    except ControlPlaneRefusedError as err:
        return refused(command, err)
    except KubernetesRejectedError as err:
        log.error(
            "Kubernetes API refused a request, command failed command_id=%s status=%s error=%s",
            command.command_id,
            err.status,
            err,
        )
        return Outcome(
            CommandStatus.FAILED,
            own_result(command, CommandStatus.FAILED, f"Kubernetes API refused: {err}", [str(err)]),
            engine_posted_event=False,
        )
    except Exception as err:
        log.exception("engine error command_id=%s", command.command_id)
        text = f"{type(err).__name__}: {err}"
        return Outcome(
            CommandStatus.FAILED,
            own_result(command, CommandStatus.FAILED, f"engine error: {text}", [text]),
            engine_posted_event=False,
        )
    status = CommandStatus(result.status)
    dumped: dict[str, Any] = result.model_dump(mode="json")
    if not status.terminal:
        text = f"engine returned non-terminal status {status.value}"
        return Outcome(
            CommandStatus.FAILED,
            {**dumped, "status": CommandStatus.FAILED.value, "errors": [*dumped.get("errors", []), text]},
            engine_posted_event=False,
        )
    return Outcome(status, dumped, engine_posted_event=bool(getattr(result, "event_posted", False)))


NODE_WAIT_POLL_SECONDS = 2.0  # between two probes of a drain waiting for its node to register
NODE_WAIT_SCAN_EVERY = 8  # every 8th probe (about 16 s) also scans the node list: the index may have missed it


@dataclass
class NodeWait:
    """A drain whose instance ends at its deadline (``Job.ends``) and has no node yet, waiting for one to register
    before it is skipped: an instance warned seconds after its launch (an early replacement warned in the same Spot
    wave) registers its node a minute or so later and is given pods, which the reclaim then kills with it (found by
    ``bench/wave_slots.py``). Ends ``seconds`` (``NODE_REGISTRATION_WAIT_SECONDS``) after the first miss, or at the
    command's deadline if that comes first. It probes every ``NODE_WAIT_POLL_SECONDS``, in the node watch's index
    (fed as nodes register; a node joins NotReady, so the cordon comes before the scheduler places pods on it), and
    every ``NODE_WAIT_SCAN_EVERY``-th probe (and the last) with a paged scan of the nodes as well."""

    until: datetime
    seconds: float
    tries: int = 0

    @classmethod
    def start(cls, job: Job, now: datetime, seconds: float, counters: Counters | None = None) -> NodeWait:
        """The wait of ``job`` from its first miss at ``now`` (logged, counted ``node_wait``)."""
        log.info(
            "no node for the instance yet, waiting %g s for it to register command_id=%s instance_id=%s",
            seconds,
            job.command.command_id,
            job.command.instance_id,
        )
        if counters is not None:
            counters.inc("node_wait")
        return cls(until=now + timedelta(seconds=seconds), seconds=seconds)

    def left(self, job: Job, now: datetime) -> float:
        """Seconds left to wait at ``now``: to ``until`` or to the job's deadline (as tightened), the earlier."""
        return min((self.until - now).total_seconds(), job.command.seconds_left(now))

    def next_probe(self, left: float) -> tuple[float, bool]:
        """After a miss with ``left`` seconds to wait: the pause before the next probe and whether it scans."""
        self.tries += 1
        pause = min(NODE_WAIT_POLL_SECONDS, left)
        return pause, self.tries % NODE_WAIT_SCAN_EVERY == 0 or left <= NODE_WAIT_POLL_SECONDS

    def ended(self, command: Command, err: Exception) -> Outcome | None:
        """The wait is over with ``err`` the last probe's miss: ``skipped`` when no node was found; None (left to the
        drain step, which cordons again and decides from its own error, as a failed cordon always was) when the
        probe met a transient API error: the node may be there."""
        if isinstance(err, NodeNotFoundError):
            return skipped(command, f"{err}; none registered within {self.seconds:g} s or the deadline")
        log.warning("node wait ended on an API error command_id=%s: %s", command.command_id, err)
        return None


def skipped(command: Command, message: str) -> Outcome:
    """The end of a command whose instance has no node (nothing to cordon or drain): ``skipped``, no Event (no node
    to post it on)."""
    return Outcome(CommandStatus.SKIPPED, own_result(command, CommandStatus.SKIPPED, message), engine_posted_event=True)


def refused(command: Command, err: ControlPlaneRefusedError, metrics: AgentMetrics | None = None) -> Outcome:
    """The end of a command refused on a control-plane node (``agent.drain.guard``): ``failed``, the node untouched,
    marked ``control_plane_refused`` so its instance's lifecycle action is never completed."""
    log.warning("control-plane command refused command_id=%s: %s", command.command_id, err.why)
    if metrics is not None:
        metrics.control_plane_refusals.labels(reason="not_allowed").inc()
    result = own_result(command, CommandStatus.FAILED, err.why, [err.why])
    return Outcome(CommandStatus.FAILED, {**result, CONTROL_PLANE_REFUSED: True}, engine_posted_event=False)
