"""The simulated agent's receive (``sim.agent.SimAgent`` mixes this in): a long poll, as
``agent.consumer.loop.CommandConsumer.run`` makes it, on events instead of a period (``sim.agent``'s module
docstring, "Receive"; Amazon SQS Developer Guide, "Amazon SQS short and long polling").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from adapters.aws.ports import CommandReceiver
from agent.consumer.config import ConsumerConfig
from agent.consumer.loop import MAX_MESSAGES_PER_RECEIVE, log_receive_failure, receive_backoff_seconds
from sim.agent_slots import DrainSlots
from sim.kernel import Kernel, Timer


class LongPollQueue(CommandReceiver, Protocol):
    """The command queue with what a long poll waits for (``sim.sqs.SimQueue`` fits): the simulated second its
    earliest message is visible (None: empty), and a callback told of a message made visible by a call."""

    def next_visible(self) -> float | None: ...

    def listen(self, wake: Callable[[float], None]) -> None: ...


class LongPollReceive(DrainSlots):
    """The receive of one ``SimAgent`` (module docstring) beside its drain slots (whose ``_pump`` it extends); the
    attributes are the agent's."""

    kernel: Kernel
    queue: LongPollQueue
    config: ConsumerConfig
    name: str
    alive: bool
    leading: bool
    poll_seconds: float
    _wake: Timer | None
    _state: str
    _failures: int

    def handle(self, message: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def poll(self) -> None:
        """One receive, each message handled at once (``CommandWorker.handle``), then the next receive scheduled
        (module docstring, "Receive"); errors counted and backed off, never raised."""
        if not (self.alive and self.leading):
            self._state = ""
            return  # a standby receives nothing (``lead(True)`` receives again)
        free = self._free()
        if free <= 0:
            self._state = "full"  # ``_pump`` receives again when a slot frees
            return
        self._state = ""  # polling: the queue's news of a visible message is read at the end
        try:
            messages = self.queue.receive(
                min(MAX_MESSAGES_PER_RECEIVE, free), self.config.wait_seconds, self.config.visibility_timeout_seconds
            )
        except Exception as err:  # noqa: BLE001 - as the consumer's loop: backs off, counts, logs
            self._count("receive_errors")
            self._failures += 1
            delay = receive_backoff_seconds(self._failures)
            log_receive_failure(err, delay, self._failures)
            self._receive_at(self.kernel.t + delay, "backoff")
            return
        self._failures = 0
        if messages:  # an empty receive (most of a week's long polls) leaves the bound as it found it
            for message in messages:
                self.handle(message)
            if self._free() <= 0:
                self._state = "full"
                return
        now, visible = self.kernel.t, self.queue.next_visible()
        end = now + (self.config.wait_seconds or self.poll_seconds)
        self._receive_at(end if visible is None else min(end, max(now, visible)), "waiting")

    def _free(self) -> int:
        """How many more messages the bound admits: ``max_in_flight`` less every command the product's loop would
        still hold a thread for (``CommandConsumer._busy``): a drain running, waiting for a slot, or sleeping between
        its tries or its node probes (``backing_off``)."""
        return self.config.max_in_flight - len(self.running) - len(self.waiting) - len(self.backing_off)

    def _receive_at(self, when: float, state: str = "waiting") -> None:
        """Receive at simulated second ``when``, or earlier when a receive is pending before it: one pending receive
        per process (a stale one, of an earlier life or moved earlier, is cancelled)."""
        wake = self._wake
        if wake is not None:
            if wake.at <= when:
                return
            wake.cancel()
        self._state = state

        def fire() -> None:
            if self._wake is timer:
                self._wake = None
                self.poll()

        self._wake = timer = self.kernel.at(when, f"agent:{self.name}:poll", fire)

    def _visible(self, at: float) -> None:
        """The queue's news (``listen``): a message visible at simulated second ``at``; a long poll waiting returns
        then. Not while full, backing off or inside a receive (its end reads ``next_visible``)."""
        if self._state == "waiting" and self.alive and self.leading:
            self._receive_at(at)

    def _pump(self) -> None:
        """``DrainSlots._pump``; a slot freed while the bound was full receives again at once (as the loop's wait
        for a free slot is woken by a job's end)."""
        super()._pump()
        if self._state == "full" and self.alive and self.leading and self._free() > 0:
            self._receive_at(self.kernel.t)
