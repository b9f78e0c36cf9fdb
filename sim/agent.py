"""The in-cluster agent on simulated time: its command handling, membership reporting and cordon releaser driven by
kernel actions instead of threads, running the product's own code.

- Receive: a long poll, as ``agent.consumer.loop.CommandConsumer.run`` makes it (ReceiveMessage with
  ``wait_seconds``, up to 10 messages while fewer than ``max_in_flight`` commands are in flight), on events instead of
  a period. The queue (``LongPollQueue``: the SimAws SQS queue, ``sim.sqs``, whose at-least-once delivery and
  visibility timeouts follow the SQS Developer Guide) answers at once; the next receive comes when a message becomes
  visible (sent, its visibility timeout over, or made visible by ChangeMessageVisibility: ``next_visible`` and
  ``listen``) or when ``wait_seconds`` passed (the empty long poll's end), whichever is first, as the Developer
  Guide's "Amazon SQS short and long polling" describes. With the bound full it receives again when a slot frees (a
  drain ends or a waiting one leaves); after a receive error, after the loop's backoff (``receive_backoff_seconds``).
  Each process has at most one receive pending (``agent:<name>:poll``); a restart cancels it.
- Each message goes through ``agent.consumer.worker.CommandWorker.handle`` itself: ``parse_message``,
  ``bind_to_record`` against the ``CMD#`` item, ``tightened``, ``Store.start_command`` (or ``on_refusal``), the fast
  cordon step (``steps.cordon_first``), ``Reporter.report`` (``finish_command`` then the EventBridge event), the
  lifecycle action's completion (``agent.hooks.HookFinisher.complete``: CompleteLifecycleAction CONTINUE through
  the Auto Scaling port) and the message's deletion. Cordon and uncordon commands run at once through
  ``DrainEngine.run``. Only where the worker would block does ``sim.agent_slots`` take over: a drain waits for one
  of ``concurrency`` slots, earliest deadline first (``schedule.DeadlineGate``'s rule, urgent drains at once), or
  for its instance's node (``steps.NodeWait``), then runs as a ``sim.agent_drain.SimDrain``; its result goes back
  through ``steps.execute`` (judged as of the drain's start) and the worker's own ``_finish``. A drain that ends on
  a retryable error runs again after ``retry.Retry``'s backoff within ``command_retry_seconds`` and its deadline, as
  ``_execute_or_give_back`` retries it, before it is handed back. The worker's other step retries (``retry.Retry``:
  the ``CMD#`` read, start, terminal write, handback) run the product's loop with ``sim.agent_worker.RetryClock``'s
  sleep and clock and the seeded ``agent:<name>:retry`` stream's jitter: their tries answer as of the step's instant,
  and nothing waits for the wall clock.
- ``agent.consumer.heartbeat.Heartbeat.beat_once`` every ``heartbeat_seconds``: visibility extended, ``CMD#``
  heartbeats, takeovers noticed, tightened deadlines passed to the running drain (or to a waiting one's job, its
  place among the waiting moved), lifecycle heartbeats.
- Only the leader works (``agent.app``: the consumer, the membership reporter and the releaser run while leading):
  every ``MEMBERSHIP_RESYNC_SECONDS`` the membership reporter's step (``_membership_step``: its list,
  ``MembershipReporter.resync``, every ``MEMBERSHIP_RELIST_SECONDS`` and after a 410; in between the node watch's
  events since the last step, ``follow``, then ``confirm``): the watch is followed in batches, so a node's change
  reaches its ``NODE#`` item at the next step, as a list's would; the nodes it writes Ready go out as "Node Ready"
  events, ``agent.ready.ReadyReporter.flush``, at the end of it; a step that fails begins a new term of the same
  reporter, listed at the next step, as ``MembershipReporter.run`` after its backoff) and
  ``agent.cordons.releaser.CordonReleaser.check_once`` every ``CORDON_CHECK_SECONDS``.
- Faults: ``restart`` (the process dies: in-flight work is lost, its items stay ``running`` until their heartbeat
  is stale and its messages come back after their visibility timeout; it starts again with a new worker id, still
  leading if it led: a single replica takes its Lease back) and ``lead`` (leadership gained: the consumer starts;
  or lost: work stops, in-flight commands are handed back after the shutdown grace, the process restarts as a
  standby).

Usage (inside ``kernel.installed()``, so the product's ``utcnow()`` is simulated time)::

    agent = SimAgent(kernel, kube, aws.queue, dynamo.table(name), aws.autoscaling, settings, name="agent-a")
    standby = SimAgent(kernel, kube, aws.queue, dynamo.table(name), aws.autoscaling, settings, name="agent-b",
                       leader=False)
    kernel.at(t, "fault:agent-restart", agent.restart)       # or agent.lead(False); standby.lead(True)
    agent.events.entries                                     # the result events it put on the bus

A drain-only policy (aws-node-termination-handler's queue mode) can run ``sim.agent_drain.SimDrain`` on a warning
without a queue or a table (``bench.sim_kube`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from itertools import count
from typing import Any, Protocol

from adapters.aws.events import EventBus
from adapters.aws.ports import GroupReader, LifecycleActions
from adapters.dynamo.store import Store
from agent.asglookup import AsgLookup
from agent.consumer.config import ConsumerConfig
from agent.consumer.heartbeat import Heartbeat
from agent.consumer.jobs import Job
from agent.cordons.releaser import CordonReleaser
from agent.drain.engine import DrainEngine
from agent.hooks import HookFinisher
from agent.membership import MembershipReporter
from agent.ready import ReadyReporter
from agent.report import Reporter
from core.exceptions import WatchExpiredError
from core.settings import AgentSettings
from sim.agent_drain import SimDrain
from sim.agent_receive import LongPollQueue, LongPollReceive
from sim.agent_worker import EventLog, ResultEngine, RetryClock, SimWorker
from sim.kernel import Kernel, Timer
from sim.kube import SimKube

log = logging.getLogger(__name__)


class AutoScalingForAgent(GroupReader, LifecycleActions, Protocol):
    """What the agent calls on Auto Scaling (the SimAws ``autoscaling`` fits)."""


class SimAgent(LongPollReceive):
    """One agent process (see the module docstring).

    Args:
        kernel, kube: the simulation.
        queue: the command queue (``LongPollQueue``).
        table: a boto3 ``dynamodb.Table`` stand-in (``sim.dynamo.MemoryTable``, or moto's in tests).
        autoscaling: lifecycle actions and group reads (``AutoScalingForAgent``).
        settings: the agent's settings (cluster, periods, drain knobs).
        name: the process's name; its worker id is ``<name>:<restarts>``.
        leader: whether it starts as the leader.
        events: the EventBridge client for result events (default an ``EventLog``).
        poll_seconds: seconds between receives of a short poll (``wait_seconds`` 0, where the product's loop asks
            again as fast as SQS answers); a long poll waits ``wait_seconds`` instead.
        resync_every: seconds between membership resyncs (default ``MEMBERSHIP_RESYNC_SECONDS``, what the seeds of
            ``python -m sim run`` use). A steady resync costs the product's own 1-3 ms of CPU at 1,000 nodes (a
            comparison of a few fields a node, BENCHMARKS.md "The fleet simulation's speed per seed"); a test may
            resync less often (the items' refresh and TTL still follow the settings).
    """

    def __init__(
        self,
        kernel: Kernel,
        kube: SimKube,
        queue: LongPollQueue,
        table: Any,
        autoscaling: AutoScalingForAgent,
        settings: AgentSettings,
        *,
        name: str = "agent",
        leader: bool = True,
        events: Any = None,
        poll_seconds: float = 2.0,
        resync_every: float | None = None,
    ) -> None:
        self.kernel = kernel
        self.kube = kube
        self.queue = queue
        self.store = Store(table, settings.cluster_name)
        self.autoscaling = autoscaling
        self.settings = settings
        self.name = name
        self.leading = leader
        self.events = events if events is not None else EventLog()
        self.poll_seconds = poll_seconds
        self.resync_every = float(resync_every or settings.membership_resync_seconds)
        self.restarts = 0
        self.alive = False
        self.counts: dict[str, int] = {}
        self._rand = kernel.stream(f"agent:{name}:backoff").random
        self._retry_rand = kernel.stream(f"agent:{name}:retry").random  # the worker's step retries' jitter
        self.retry_clock = RetryClock(kernel.monotonic)
        self._timers: list[Timer] = []
        self._wake: Timer | None = None  # the one pending receive (``_receive_at``)
        self._state = ""  # why it is pending: "waiting" (a long poll), "backoff"; "full": none, a freed slot receives
        queue.listen(self._visible)
        self._terms = count()  # the membership reporters' terms (``MembershipReporter(terms=...)``), across restarts
        self.start()

    # ------------------------------------------------------------------------------------------- lifecycle

    @property
    def worker_id(self) -> str:
        return f"{self.name}:{self.restarts}"

    def start(self) -> None:
        """Start the process: a fresh engine, worker, heartbeat and (when leading) reporter and releaser."""
        s = self.settings
        self.alive = True
        self.config = ConsumerConfig.from_settings(s, self.worker_id)
        self.engine = DrainEngine(self.kube, s, clock=self.kernel, rand=self._rand)
        self.results = ResultEngine(self.engine)
        self.hooks = HookFinisher(self.store, self.autoscaling, self.worker_id, clock=self.kernel.now)
        reporter = Reporter(self.store, self.events, s.event_bus_name, sleep=self.retry_clock.sleep)
        self.worker = SimWorker(
            self.queue,
            self.store,
            self.results,
            reporter,
            self.config,
            self.kernel.now,
            hooks=self.hooks,
            sleep=self._no_sleep,
        )
        # the product's retries wait on the simulation's clock, jittered from the seed (no time.sleep, no
        # time.monotonic, no unseeded random: a run is bit for bit the same and never waits for the wall clock)
        clock = self.retry_clock
        self.worker.retry = replace(
            self.worker.retry, sleep=clock.sleep, monotonic=clock.monotonic, rand=self._retry_rand
        )
        self.worker.agent = self
        self.engine.drains_in_flight = self.worker.drains_in_flight  # an uncordon leaves a waiting drain's cordon
        self.waiting: list[tuple[datetime, int, Job]] = []
        self.running: dict[str, tuple[Job, SimDrain, datetime]] = {}
        self.backing_off: dict[str, Job] = {}
        self._seq = count()
        self.heartbeat = Heartbeat(
            self.queue,
            self.store,
            self.config,
            self.kernel.now,
            self._jobs,
            self.hooks,
            tighten=self._tighten,
            monotonic=self.kernel.monotonic,
            tighten_waiting=self._tighten_waiting,
        )
        self._failures = 0  # receive errors in a row (the loop's ``failures``)
        self._state = ""
        if self.leading:
            self._receive_at(self.kernel.t)  # the consumer's first receive
        self._every(self.config.heartbeat_seconds, "heartbeat", self.heartbeat.beat_once)
        self._every(self.resync_every, "membership", self._resync)
        self._every(float(s.cordon_check_seconds), "cordons", self._check_cordons)
        self._new_term()

    def _no_sleep(self, seconds: float) -> None:
        """The worker's own sleep (a control-plane drain's wait for a slot, ``CommandWorker._pause``): never called
        here (``SimWorker`` hands a drain to the slots instead); ``Kernel.sleep`` raises if it is."""
        self.kernel.sleep(seconds)

    def restart(self, down_seconds: float = 5.0) -> None:
        """The process dies now (in-flight work lost, nothing handed back) and starts again ``down_seconds`` later
        with a new worker id. Nothing when it is already down."""
        if not self.alive:
            return
        self.alive = False
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        for _, drain, _ in self.running.values():
            drain.cancel()
        self.running.clear()
        self.waiting.clear()
        self.backing_off.clear()
        self.restarts += 1
        self._count("restarts")
        self.kernel.after(down_seconds, f"agent:{self.name}:start", self.start)

    def lead(self, leading: bool) -> None:
        """Leadership gained (the consumer starts; a new term: the membership reporter reads the table again) or
        lost: as ``agent.app`` does, work stops (no receive, no new drain), in-flight commands get
        ``AGENT_SHUTDOWN_GRACE_SECONDS`` to finish, the rest are handed back (item ``queued``, message visible at
        once: ``CommandConsumer.shutdown``), and the process restarts as a standby (a new worker id)."""
        if leading and not self.leading:
            self.leading = True
            self._new_term()
            self._pump()
            self._receive_at(self.kernel.t)  # the consumer starts
        elif not leading and self.leading:
            self.leading = False
            self._count("leadership_lost")
            life = self.restarts
            self.kernel.after(
                self.config.shutdown_grace_seconds, f"agent:{self.name}:step-down", lambda: self._step_down(life)
            )

    def _step_down(self, life: int) -> None:
        if not self.alive or self.leading or self.restarts != life:  # died meanwhile, or leading again
            return
        for _, drain, _ in self.running.values():
            drain.cancel()
        for job in self._jobs():
            if job.close():
                job.handed_back = True
                self.worker.give_back(job, visibility_seconds=0)
                self._count("handed_back")
        self.restart(down_seconds=1.0)

    def _term(self) -> str:
        return f"{self.name}.{next(self._terms)}"

    def _new_term(self) -> None:
        s = self.settings
        self.membership = MembershipReporter(
            self.kube,
            self.store,
            AsgLookup(self.autoscaling, clock=self.kernel.monotonic),
            s.membership_resync_seconds,
            s.membership_ttl_seconds,
            clock=self.kernel.now,
            relist_seconds=s.membership_relist_seconds,
            terms=self._term,
        )
        self._node_version: str | None = None  # the watch's resourceVersion; None: list at the next resync
        self._next_relist = 0.0
        self.ready: ReadyReporter | None = None
        if s.ready_events:  # as agent.app: the leader's "Node Ready" reports, on the same bus as the results
            self.ready = ReadyReporter(EventBus(self.events, s.event_bus_name), s.cluster_name)
            self.membership.on_ready = self.ready.note
        self.releaser = CordonReleaser(self.store, self.engine, s.cordon_check_seconds, clock=self.kernel.now)

    def _every(self, period: float, what: str, action: Callable[[], None]) -> None:
        """``action`` every ``period`` seconds of this life, its next run queued before it works (as a loop that sets
        its wake first): one kernel timer, requeued (``Kernel.every``), cancelled by a restart."""
        self._timers.append(self.kernel.every(period, f"agent:{self.name}:{what}", action, rearm_first=True))

    def _count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    # ------------------------------------------------------------------------------------------- commands

    def handle(self, message: Mapping[str, Any]) -> None:
        self._guarded(lambda: self.worker.handle(message), str(message.get("MessageId")))

    def _guarded(self, work: Callable[[], None], message_id: str = "") -> None:
        try:
            work()
        except Exception:  # as CommandConsumer._work: logged and counted, the message comes back
            log.exception("unexpected error handling message_id=%s", message_id)
            self._count("errors")

    # --------------------------------------------------------------------------------------------- leader

    def _resync(self) -> None:
        if not (self.alive and self.leading):
            return
        try:
            self._membership_step()
            if self.ready is not None:
                self.ready.flush()
        except Exception:  # as MembershipReporter.run: logged, and the same reporter (its ASG look-ups, bases and
            # due refreshes kept: agent.app makes one a process) begins a new term that reads the table again at its
            # next list, which comes next; the process's Ready reporter and cordon releaser go on as they were
            log.exception("membership resync failed")
            self._count("membership_errors")
            self.membership.new_term()
            self._node_version = None

    def _membership_step(self) -> None:
        """As ``agent.membership_loop.WatchLoop.run`` between its watches: a list when one is due (or the watch
        expired), else the watch's events since the last one applied, then a confirmation."""
        reporter, now = self.membership, self.kernel.t
        if self._node_version is not None and now < self._next_relist:
            try:
                self._node_version = reporter.follow(self._node_version, int(self.resync_every))
            except WatchExpiredError:
                self._node_version = None  # 410 Gone: list again, now
            else:
                reporter.confirm()
                return
        self._node_version = reporter.resync()
        self._next_relist = now + reporter.relist_seconds

    def _check_cordons(self) -> None:
        if self.alive and self.leading:
            self.releaser.check_once()
