"""Cordons given back after a quiet period: a command recorded with ``options.uncordon_after_seconds`` (a rebalance
recommendation's cordon or drain, ``REBALANCE_QUIET_SECONDS``) has its cordon undone that long after it ended, when
nothing followed for its instance and the cordon is still that command's.

``decisions`` judges one command (pure); ``releaser`` is the leader's periodic loop that reads the table, judges,
claims and uncordons. The state is the ``CMD#`` item (``finished_at``, then ``resolution``/``resolved_at``), so the
quiet period survives an agent restart or a change of leader.
"""
