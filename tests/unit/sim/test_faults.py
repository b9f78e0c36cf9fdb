"""``Faults.check`` (no walk before the earliest start of the windows not yet ended) answers as ``Faults.check_all``
(the walk over every window) does: the same codes, the same random draws, the same counts, for random windows added
as time goes (some starting later, some already over when added)."""

from __future__ import annotations

import random

import pytest

from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel

SERVICES = ("autoscaling", "ec2", "sqs", "dynamodb", "kube", "events")
OPERATIONS = ("", "Put", "PutItem", "Query", "ReceiveMessage", "Describe", "DescribeAutoScalingGroups")
CODES = ("ThrottlingException", "InternalError", "ServiceUnavailable")


@pytest.mark.parametrize("seed", range(30))
def test_check_answers_as_the_walk_over_every_window(seed: int) -> None:
    rng = random.Random(seed)
    fast, slow = Faults(Kernel(seed)), Faults(Kernel(seed))
    t = 0.0
    for _ in range(400):
        t += rng.choice([0.0, 0.0, 0.5, 3.0, 40.0])
        fast.kernel.t = slow.kernel.t = t
        if rng.random() < 0.1:
            start = t + rng.choice([-50.0, 0.0, 5.0, 30.0])
            window = FaultWindow(
                rng.choice(SERVICES),
                rng.choice(OPERATIONS),
                start,
                start + rng.choice([0.0, 1.0, 20.0, 200.0]),
                rng.choice(CODES),
                rng.choice([1.0, 0.5, 0.1]),
            )
            fast.add(window)
            slow.add(window)
        service, operation = rng.choice(SERVICES), rng.choice(OPERATIONS[1:])
        assert fast.check(service, operation) == slow.check_all(service, operation)
    assert fast.injected == slow.injected and fast.injected  # some were injected
    assert fast._rng.getstate() == slow._rng.getstate()  # the same draws
