"""Early replacement of an interrupted instance: the ``DETACH#<instance-id>`` record's states.

The interruption Lambda records the intent to detach an instance from its group before calling DetachInstances
(``intended``), and marks it ``detached`` after, so a crash between the two is completed by the redelivered event
and a duplicate event never detaches twice.
"""

from __future__ import annotations

from enum import Enum


class DetachState(str, Enum):
    """State of a ``DETACH#`` record."""

    INTENDED = "intended"  # recorded before DetachInstances
    DETACHED = "detached"  # DetachInstances done (or the instance was no longer in the group)
