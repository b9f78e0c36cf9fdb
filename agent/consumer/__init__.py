"""The command consumer: long-polls SQS and runs each command once, whatever SQS delivers.

Modules: ``decisions`` (pure: sort a message, what a refused start means, hand-back delays), ``config`` (the knobs),
``steps`` (the fast step, cordon, and the slow one, the command through the engine, each turned into an outcome),
``schedule`` (``DeadlineGate``: drain slots, earliest deadline first), ``retry`` (retryable errors retried in the
agent), ``worker`` (one message to its end) on ``answers`` (its state and its answers to SQS), ``heartbeat``
(visibility, ``CMD#`` heartbeats, lifecycle-hook heartbeats) and ``loop`` (``CommandConsumer``: the receive loop and
shutdown).

SQS delivers at least once, and anyone allowed to send to the queue can write a body, so the ``CMD#<id>`` item a
Lambda recorded before sending decides (``adapters.dynamo.store.Store``):

1. ``parse_message`` (pure) sorts each message: a command for this cluster, one for another cluster (deleted,
   logged, counted), or garbage (logged with its id and a preview, counted, made visible again at once so the
   queue's RedrivePolicy moves it to the dead-letter queue after ``maxReceiveCount`` receives).
   ``bind_to_record`` (pure) then reads the body as a pointer: the agent loads the ``CMD#`` item of the body's
   ``command_id`` and runs the STORED command, only when the body claims exactly what the item records (cluster,
   kind, instance, node name, deadline, options). No item (``no_record``) or a difference (``mismatch``): the
   message is rejected like garbage (logged, counted in ``commands_rejected``, left for the dead-letter queue,
   never deleted) and the item is not touched.
2. ``Store.start_command`` moves the item ``queued`` → ``running`` (or takes over a ``running`` item whose heartbeat
   is older than ``STALE_RUNNING_SECONDS``: its worker died; ``attempt`` + 1). When it refuses, ``on_refusal``
   (pure) says what the message gets: deleted (a duplicate of a finished command), its notifications re-sent and
   deleted (finished by a worker that died before notifying), deleted as a redundant copy (a live worker runs it
   from another message, whose return when that worker dies, or else the replenisher's sweep, covers it), or left
   for later (another live worker runs it from this very message, or the item names none; it becomes visible again
   about when that worker's heartbeat would go stale). A job's own message that comes back to its worker (its
   visibility lapsed) is adopted: the job takes the new receipt handle.
3. A drain's node is cordoned at once (``DrainEngine.cordon``, the fast step), whatever the number of drains
   running; the drain then waits for one of ``concurrency`` slots, earliest deadline first, and the engine runs it
   (``DrainEngine.run``, which finds the node cordoned as ours and evicts). Cordon and uncordon commands run at once.
   Meanwhile a heartbeat thread extends the message's visibility and the item's ``heartbeat_at`` every third of the
   visibility timeout, for waiting drains as for running ones, and applies a deadline a Spot warning tightened in
   the item (``deadline_tightened_to``): to the running drain (``DrainEngine.tighten``), or to a waiting drain's
   command and its place in the queue (``CommandWorker.tighten_waiting``: it starts tightened, its cordon marked
   instance-ending, ``uncordon_on_failure`` off).
4. ``Reporter.report`` writes the terminal status, then notifies; the message is deleted once EventBridge took
   the event. When it did not, the message is left: it comes back after the visibility timeout and the
   notification is sent again (``on_refusal`` → NOTIFY_AGAIN), at most until the RedrivePolicy gives up.

Decisions for the edge cases:

- A drain whose deadline passed before it started (received late, or waiting for a slot: that wait ends at the
  deadline, every slot may be held by drains blocked for up to ``MAX_COMMAND_SECONDS``) is not run: draining with
  no time left evicts pods for nothing. Its node is still cordoned (no pod should be scheduled onto an instance that
  is going) and it ends ``timed_out`` with reason "deadline passed before start". Cordon and uncordon still run: each
  is one idempotent write that stays right when late (an uncordon must happen whenever it arrives).
- A cordon that fails in the fast step is logged and counted (``loop_errors{loop="cordon"}``); the drain cordons
  again when it starts, and its own error decides the command's end.
- ``NodeNotFoundError`` (the instance's node never joined, or is gone) ends ``skipped``.
- A ``RetryableError`` (Kubernetes API down before any work was done, DynamoDB throttling the item's read, start
  or terminal write) is retried in the agent with exponential backoff for ``command_retry_seconds``
  (``COMMAND_RETRY_SECONDS``), never past a drain's deadline (``retry.Retry``). Only when it outlasts that is the
  command handed back: the item returns to ``queued`` (or is left as it was, before the start) and the message
  becomes visible after ``retry_delay_seconds`` doubled per receive (``decisions.handback_delay``, at most
  ``handback_max_seconds``), so a burst of errors spends few of the queue's ``maxReceiveCount`` receives, spread
  over minutes. A message dead-lettered anyway leaves its ``CMD#`` ``queued``, which the replenisher's sweep sends
  again.
- Control-plane nodes (``agent.drain.guard``): a drain or cordon of one not for a refresher master step or a Spot
  warning or lifecycle hook of its own instance ends ``failed``, the node untouched. A drain that finds every
  control-plane slot of the cluster held (``MAX_CONTROL_PLANE_DRAINS``, ``agent.controlplane``) waits in its
  worker, uncordoned, retrying until its deadline (then ``timed_out``). Neither ever completes its instance's
  lifecycle action (``decisions.completes_hook``): CONTINUE would terminate a master that was not drained.
- ``KubernetesRejectedError`` (a 4xx such as 403: the agent's ClusterRole lacks a verb) and any other exception
  from the engine end ``failed`` with the error in the result: retrying them would loop.
- Shutdown: polling stops; in-flight commands get ``shutdown_grace_seconds`` to finish; the rest are handed back
  (item ``queued`` again, message visible at once) so another agent takes them without waiting for staleness.
- Lifecycle hooks (``agent.hooks``): while a drain runs (or waits for a slot), its instance's pending termination
  lifecycle action gets a heartbeat every ``lifecycle_heartbeat_seconds`` until the drain's deadline; when a drain
  ends (any terminal status but a refused control-plane drain's, and again for a duplicate delivery of a finished
  drain), the action is completed with CONTINUE before the message is deleted.

Observability: every log line written while a message's command is handled carries its ``command_id``,
``instance_id`` and ``node`` (``agent.logs.command_context``); counts go to ``agent.metrics.AgentMetrics``, drain
failures to CloudWatch (``agent.cloudwatch``), and the poll loop's ticks and successful receives to
``agent.health.Health`` (liveness and readiness probes).

Threads: one poll loop (``run``), one worker thread per in-flight command (at most ``max_in_flight``; at most
``concurrency`` of them evicting), one heartbeat thread. What bounds the agent's load on the apiserver is the
client-side rate limit of its Kubernetes client (``agent.kube.ratelimit``), where cordons go first.
The boto3 clients are shared (they are thread-safe); the ``Store``'s Table resource is used for
plain item calls only, which hold no per-resource state.
"""
