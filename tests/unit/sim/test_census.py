"""``bench.sim_census``: every executed step timed under its folded kind, and the kernel left as it was."""

from __future__ import annotations

from collections import Counter, defaultdict

import sim.kernel
from bench.sim_census import FOLD, timed_actions
from sim.run import run_seed


def test_every_step_is_counted_under_its_kind_and_the_kernel_is_restored() -> None:
    init = sim.kernel.Timer.__init__
    cost: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    with timed_actions(cost, count):
        result = run_seed(3, 12, 0.05)
    assert sim.kernel.Timer.__init__ is init
    assert result.violation is None
    assert sum(count.values()) == result.steps  # each executed action once (cancelled ones never run)
    assert set(cost) == set(count) and all(seconds >= 0 for seconds in cost.values())
    assert count["agent:agent:membership"] > 0 and count["deliver replenisher Scheduled Event"] > 0
    assert not [kind for kind in count if FOLD.search(kind.replace("#", ""))]  # no id or number left in a kind


def test_a_run_after_the_census_is_the_same_run() -> None:
    with timed_actions(defaultdict(float), Counter()):
        timed = run_seed(3, 12, 0.05)
    assert run_seed(3, 12, 0.05).digest == timed.digest
