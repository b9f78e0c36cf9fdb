"""Early replacement of an interrupted instance: the ``DETACH#<instance-id>`` record's states.

The interruption Lambda records the intent to detach an instance from its group before calling DetachInstances
(``intended``), and marks it ``detached`` after, so a crash between the two is completed by the redelivered event
and a duplicate event never detaches twice.

A detached instance is outside every group: nothing would terminate it if the Spot reclaim never came. The
replenisher's tick sweeps the records (``lambdas.replenisher.decide.detached``): one still running
``DETACHED_MAX_SECONDS`` after it was recorded is marked ``terminating``, terminated (EC2 TerminateInstances), then
``terminated``; one EC2 no longer runs is marked ``gone``.
"""

from __future__ import annotations

from enum import Enum


class DetachState(str, Enum):
    """State of a ``DETACH#`` record."""

    INTENDED = "intended"  # recorded before DetachInstances
    DETACHED = "detached"  # DetachInstances done (or the instance was no longer in the group)
    TERMINATING = "terminating"  # still running past its deadline: TerminateInstances intended (the replenisher)
    TERMINATED = "terminated"  # terminated by the replenisher's sweep
    GONE = "gone"  # no longer running when the sweep looked (reclaimed by Spot, or terminated by someone else)
