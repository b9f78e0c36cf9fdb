"""Seeded, composable fault schedules: what happens to the simulated cluster and when (issue 12).

A schedule is a plain tuple of ``Fault`` entries (data only: kind, simulated start, duration, parameters), drawn
from the kernel's streams, so one seed gives one schedule and a failing schedule can be shrunk by dropping entries
(``sim.run.shrink``). ``sim.world.World.apply`` turns each entry into scheduled actions. Targets that depend on the
world at that moment (which instance of an AZ is reclaimed) are chosen then, from the world's own stream.

What the generators follow:

- Spot interruptions: "Spot Instance interruptions" (EC2 User Guide): a two-minute warning, then the reclaim; the
  Spot Instance Advisor's frequency bands (<5 %, 5-10 %, 10-15 %, 15-20 %, >20 % of instances interrupted a month)
  give the base rate; reclaims come in waves per capacity pool (a Poisson process per pool and AZ, and bursts of
  several instances within minutes).
- Rebalance recommendations: "EC2 instance rebalance recommendations": sent ahead of, or instead of, an
  interruption; some are followed by one, some never.
- AZ capacity outages: ``InsufficientInstanceCapacity`` for a pool or AZ, minutes to hours.
- API throttling and 5xx bursts (``sim.faults.FaultWindow``), and windows in which Auto Scaling refuses
  TerminateInstanceInAutoScalingGroup with ``ScalingActivityInProgress`` (HTTP 400, one of the two errors the EC2
  Auto Scaling API Reference documents for that call: "The operation can't be performed because there are scaling
  activities in progress"; it does not say when, so the window is drawn like the others), Lambda crashes and
  timeouts, concurrent invocations
  (one run whole between two port calls of another), duplicate and late events, agent restarts, kOps resetting
  group sizes (``kops update cluster``), operators (manual refresh, cancel, ``kubectl cordon``/``uncordon``),
  PDB-blocked workloads, the weekly refresh (a rule of ``sim.eventbridge``).
- kOps instance group specs ("Instance Groups", kOps documentation: ``minSize``, ``maxSize``): a worker group's spec
  with room (MinSize up to 1 below its size, MaxSize 1-2 above) from the start, and specs edited mid-week and applied
  (``kops edit ig``, then ``kops update cluster --yes``, which writes MinSize and MaxSize; Auto Scaling clamps the
  desired capacity into them, "UpdateAutoScalingGroup", EC2 Auto Scaling API Reference), some while a manual refresh
  of that group is under way; manual refreshes asking ``max_surge`` 2 (``lambdas.events.request``). A profile without
  them (the default one) draws what it drew before they existed: their draws come last.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

HOUR = 3600.0
DAY = 24 * HOUR

# (service, operation prefix, error code) of the API fault windows: throttling and 5xx of every service, answers lost
# after the effect (``sim.aws_common.check_lost_answer``), and Auto Scaling refusing a terminate (a 400 the adapter
# raises as ``AwsRequestError``: the give-back must count it refused and retry, never count it given back)
API_FAULTS: tuple[tuple[str, str, str], ...] = (
    ("autoscaling", "", "Throttling"),
    ("autoscaling", "", "ServiceUnavailable"),
    ("ec2", "", "RequestLimitExceeded"),
    ("dynamodb", "", "ProvisionedThroughputExceededException"),
    ("dynamodb", "", "InternalServerError"),
    ("sqs", "", "ThrottlingException"),
    ("kube", "", "TooManyRequests"),
    ("autoscaling:lost-answer", "", "ServiceUnavailable"),
    ("ec2:lost-answer", "", "InternalError"),
    ("autoscaling", "TerminateInstanceInAutoScalingGroup", "ScalingActivityInProgress"),
)

# the forged command messages (``sim.actors._forged``)
FORGED = ("garbage", "foreign", "no_record", "replay", "mismatch")

KINDS = (
    "spot",
    "spot_burst",
    "rebalance",
    "outage",
    "api",
    "crash",
    "concurrent",
    "late_event",
    "bad_event",
    "forged_message",
    "agent_restart",
    "kops_reset",
    "kops_spec",
    "manual_refresh",
    "cancel_refresh",
    "operator_cordon",
    "pdb_block",
    "node_not_ready",
    "bad_bootstrap",
    "foreign_terminate",
)


@dataclass(frozen=True, order=True)
class Fault:
    """One entry: ``kind`` (one of ``KINDS``) at simulated second ``at`` for ``duration`` seconds, with ``params``
    (sorted (name, value) pairs: ``az``, ``count``, ``service``, ``operation``, ``code``, ``probability``,
    ``function``, ``call``, ``follow``...)."""

    at: float
    kind: str
    duration: float = 0.0
    params: tuple[tuple[str, str | int | float], ...] = ()

    def param(self, name: str, default: str | int | float = "") -> str | int | float:
        return dict(self.params).get(name, default)

    def describe(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.at / HOUR:7.2f} h  {self.kind:<15} {self.duration / 60:6.1f} min  {args}"


@dataclass(frozen=True)
class Profile:
    """How rough the week is.

    Attributes:
        spot_monthly: fraction of Spot instances interrupted per 30 days (Spot Instance Advisor band; 0.10 = the
            5-10 % band's top).
        burst_per_day: interruption bursts (several instances of one pool within minutes) per AZ and day.
        rebalance_per_day: rebalance recommendations per 100 nodes and day; ``rebalance_followed``: the fraction
            followed by an interruption.
        outages: capacity outages in the run (each 10 minutes to 4 hours, one AZ).
        api_bursts_per_day: throttling / 5xx / refusal windows per day (1-10 minutes each), each one of
            ``api_faults`` (service, operation prefix, error code), drawn uniformly.
        crashes_per_day: Lambda crash or timeout windows per day.
        concurrent_per_day: windows per day in which a function's invocations have another (a duplicate, or
            another function's tick) run whole between two of their port calls; ``concurrent_calls``: the range
            (inclusive) the port call drawn for each window is taken from (the other runs before that call).
        operators_per_day: operator actions (manual refresh, cancel, cordon) per day.
        forged_per_day: messages on the agent's command queue that no Lambda sent for it (``sim.actors._forged``)
            per day; none in the default profile, whose seeds stay the ones recorded before they existed.
        spec_room: the share of worker groups whose kOps spec has room from the start (a ``kops_spec`` entry at
            second 0: MinSize 0-1 below the group's size, MaxSize 1-2 above).
        kops_specs_per_day: kOps spec edits applied mid-week (``kops_spec``: one group's MinSize 0-1 below its size,
            MaxSize 0-2 above; the group's size itself is kept); ``spec_after_refresh``: the share of manual
            refreshes followed, 1-30 minutes later, by such an edit of their group (while its surge is in flight).
        surge_two: the share of manual refreshes asking ``max_surge`` 2 (two steps of the group in flight).
        The last four are 0 in the default profile, whose seeds stay the ones recorded before they existed.
        not_ready_per_day: nodes whose kubelet stops posting status for 2 minutes to 2 hours (``node_not_ready``,
            ``sim.health``; a master in a quarter of them) per 100 nodes and day; ``bootstrap_per_day``: windows of
            10 minutes to 3 hours in which one AZ's new instances join late, or never (half of them: ``bad_bootstrap``)
            per day; ``master_refreshes_per_day``: manual refreshes of every master group (``manual_refresh`` with
            ``masters``: the weekly run is the only other that replaces masters), half of them followed 0.5-5 minutes
            later by a master's ``node_not_ready`` of 5-30 minutes. All three 0 in the default profile,
            and drawn after every other entry, as above.
        foreign_terminates_per_day: instances of a worker group terminated by another tool or a person
            (``foreign_terminate``, ``sim.foreign``: ``kops delete instance``, ``aws autoscaling
            terminate-instance-in-auto-scaling-group``; no drain) per day in the whole cluster, at random times;
            ``foreign_after_refresh``: the share of manual refreshes of a worker group followed, 2-40 minutes later,
            by one of their group (while a surge is in flight). Each takes the group's newest live instance
            (``target`` ``spare``: a refresh's surge spare, a compensation's instance) in 3 of 4, a random one
            (``any``) otherwise, and decrements the desired capacity (``decrement`` 1) in half of them. Both 0 in
            the default profile, and drawn after every other entry (the node health ones included), as above.
        kops_resizes_per_day: kOps resizes of a worker group (``kops_spec`` with ``grow``: the spec's MinSize and
            MaxSize moved together 1-2 up or down, the group's size clamped into them by Auto Scaling) per day;
            ``resize_in_outage``: the share of outages with such a resize of a random worker group inside them (a
            group scaled up where nothing can launch, or a donor resized under its raise). Only the ``resize``
            profile draws them, after every other entry, so its seeds are the storm's plus these.
        quiet_tail: the last seconds of the run have no new faults, so the end-state checks see a settled world.
    """

    spot_monthly: float = 0.10
    burst_per_day: float = 0.3
    rebalance_per_day: float = 1.0
    rebalance_followed: float = 0.5
    outages: int = 2
    api_bursts_per_day: float = 2.0
    crashes_per_day: float = 1.0
    concurrent_per_day: float = 1.0
    concurrent_calls: tuple[int, int] = (1, 8)
    late_per_day: float = 2.0
    bad_per_day: float = 2.0
    agent_restarts_per_day: float = 1.0
    kops_resets_per_day: float = 0.2
    operators_per_day: float = 1.0
    pdb_blocks_per_day: float = 0.5
    forged_per_day: float = 0.0
    spec_room: float = 0.0
    kops_specs_per_day: float = 0.0
    spec_after_refresh: float = 0.0
    surge_two: float = 0.0
    not_ready_per_day: float = 0.0
    bootstrap_per_day: float = 0.0
    master_refreshes_per_day: float = 0.0
    foreign_terminates_per_day: float = 0.0
    foreign_after_refresh: float = 0.0
    kops_resizes_per_day: float = 0.0
    resize_in_outage: float = 0.0
    quiet_tail: float = 6 * HOUR
    api_faults: tuple[tuple[str, str, str], ...] = API_FAULTS
    azs: tuple[str, ...] = ("us-east-1a", "us-east-1b", "us-east-1c")
    functions: tuple[str, ...] = ("interruption", "replenisher", "refresher")


CALM = Profile(
    spot_monthly=0.0,
    burst_per_day=0.0,
    rebalance_per_day=0.0,
    outages=0,
    api_bursts_per_day=0.0,
    crashes_per_day=0.0,
    concurrent_per_day=0.0,
    late_per_day=0.0,
    bad_per_day=0.0,
    agent_restarts_per_day=0.0,
    kops_resets_per_day=0.0,
    operators_per_day=0.0,
    pdb_blocks_per_day=0.0,
)

# every fault four times as often as ``Profile()`` (the Spot band's top doubled: 20 % a month), twice the outages: the
# combinations a default week rarely draws (an outage during a refresh during a kOps reset during refused writes) drawn
# often, for a soak (``python -m sim run --profile storm``; docs/SIMULATION.md "Soak"); and kOps specs with room,
# spec edits (some under a refresh's surge) and refreshes with ``max_surge`` 2, which the default profile never draws
STORM = Profile(
    spot_monthly=0.20,
    burst_per_day=1.2,
    rebalance_per_day=4.0,
    outages=4,
    api_bursts_per_day=8.0,
    crashes_per_day=4.0,
    concurrent_per_day=4.0,
    late_per_day=8.0,
    bad_per_day=8.0,
    agent_restarts_per_day=4.0,
    kops_resets_per_day=0.8,
    operators_per_day=4.0,
    pdb_blocks_per_day=2.0,
    forged_per_day=8.0,
    spec_room=0.5,
    kops_specs_per_day=0.8,
    spec_after_refresh=0.3,
    surge_two=0.5,
    not_ready_per_day=6.0,
    bootstrap_per_day=1.0,
    master_refreshes_per_day=1.0,
    foreign_terminates_per_day=2.0,
    foreign_after_refresh=0.3,
)
# the storm, and kOps resizing worker groups under it (``Profile.kops_resizes_per_day``): ``--profile resize``
RESIZE = replace(STORM, kops_resizes_per_day=2.0, resize_in_outage=0.5)
# the profiles ``python -m sim --profile`` names besides the mutants' (``sim.mutants.MUTANTS``)
PROFILES = {"storm": STORM, "resize": RESIZE}


@dataclass
class _Draw:
    rng: random.Random
    end: float
    out: list[Fault] = field(default_factory=list)

    def poisson_times(self, per_second: float) -> list[float]:
        """Arrival times of a Poisson process of rate ``per_second`` in [0, end)."""
        times: list[float] = []
        if per_second <= 0:
            return times
        t = self.rng.expovariate(per_second)
        while t < self.end:
            times.append(t)
            t += self.rng.expovariate(per_second)
        return times

    def add(self, at: float, kind: str, duration: float = 0.0, **params: str | int | float) -> None:
        self.out.append(Fault(round(at, 3), kind, round(duration, 3), tuple(sorted(params.items()))))


def generate(rng: random.Random, nodes: int, days: float, profile: Profile | None = None) -> tuple[Fault, ...]:
    """A schedule for ``nodes`` Spot workers over ``days``, drawn from ``rng`` (``kernel.stream("schedule")``).

    Returns:
        The entries, sorted by time (no entry starts in the profile's quiet tail).
    """
    p = profile or Profile()
    d = _Draw(rng, max(0.0, days * DAY - p.quiet_tail))
    per_az = max(1, nodes // len(p.azs))
    for az in p.azs:
        # the band's monthly fraction as a per-instance rate, for the AZ's instances
        for t in d.poisson_times(p.spot_monthly * per_az / (30 * DAY)):
            d.add(t, "spot", az=az, count=1)
        for t in d.poisson_times(p.burst_per_day / DAY):
            d.add(t, "spot_burst", duration=rng.uniform(60, 600), az=az, count=rng.randint(2, max(2, per_az // 10)))
    for t in d.poisson_times(p.rebalance_per_day * nodes / 100 / DAY):
        followed = int(rng.random() < p.rebalance_followed)
        d.add(
            t, "rebalance", duration=rng.uniform(120, 3600) if followed else 0.0, az=rng.choice(p.azs), follow=followed
        )
    for _ in range(p.outages if d.end > 0 else 0):
        d.add(rng.uniform(0, d.end), "outage", duration=rng.uniform(600, 4 * HOUR), az=rng.choice(p.azs))
    for t in d.poisson_times(p.api_bursts_per_day / DAY):
        service, operation, code = rng.choice(p.api_faults)
        d.add(t, "api", duration=rng.uniform(60, 600), service=service, operation=operation, code=code,
              probability=round(rng.choice((0.3, 0.7, 1.0)), 2))  # fmt: skip
    for t in d.poisson_times(p.crashes_per_day / DAY):
        d.add(t, "crash", duration=rng.uniform(60, 1800), function=rng.choice(p.functions),
              call=rng.randint(1, 12), how=rng.choice(("crash", "timeout")))  # fmt: skip
    for t in d.poisson_times(p.concurrent_per_day / DAY):
        d.add(t, "concurrent", duration=rng.uniform(60, 1800), function=rng.choice(p.functions),
              call=rng.randint(*p.concurrent_calls), other=rng.choice(p.functions))  # fmt: skip
    for t in d.poisson_times(p.late_per_day / DAY):
        d.add(t, "late_event", delay=round(rng.uniform(60, 6 * HOUR)))
    for t in d.poisson_times(p.bad_per_day / DAY):
        d.add(t, "bad_event", variant=rng.choice(("malformed", "foreign_account", "foreign_region", "unmanaged")))
    for t in d.poisson_times(p.agent_restarts_per_day / DAY):
        d.add(t, "agent_restart", leader=int(rng.random() < 0.5))
    for t in d.poisson_times(p.kops_resets_per_day / DAY):
        d.add(t, "kops_reset", az=rng.choice(p.azs))
    for t in d.poisson_times(p.operators_per_day / DAY):
        what = rng.choice(("manual_refresh", "cancel_refresh", "operator_cordon"))
        d.add(t, what, duration=rng.uniform(600, 6 * HOUR) if what == "operator_cordon" else 0.0, az=rng.choice(p.azs))
    for t in d.poisson_times(p.pdb_blocks_per_day / DAY):
        d.add(t, "pdb_block", duration=rng.uniform(600, 3 * HOUR))
    for t in d.poisson_times(p.forged_per_day / DAY):  # after the rest: a profile without them draws what it drew
        d.add(t, "forged_message", variant=rng.choice(FORGED))
    _kops_specs(d, p)  # last, for the same reason
    _node_health(d, p, nodes)  # after those: the same again
    _foreign(d, p)  # and after those
    _kops_resizes(d, p)  # last of all
    return tuple(sorted(d.out))


def _node_health(d: _Draw, p: Profile, nodes: int) -> None:
    """The node health entries (``sim.health``): ``node_not_ready`` and ``bad_bootstrap``; and refreshes of the
    masters, which a master NotReady holds back."""
    rng = d.rng
    for t in d.poisson_times(p.not_ready_per_day * nodes / 100 / DAY):
        duration, master = rng.uniform(120, 2 * HOUR), int(rng.random() < 0.25)
        d.add(t, "node_not_ready", duration=duration, master=master, pick=rng.random())
    for t in d.poisson_times(p.bootstrap_per_day / DAY):
        duration, az = rng.uniform(600, 3 * HOUR), rng.choice(p.azs)
        d.add(t, "bad_bootstrap", duration=duration, az=az, never=int(rng.random() < 0.5))
    for t in d.poisson_times(p.master_refreshes_per_day / DAY):
        d.add(t, "manual_refresh", masters=1)
        if rng.random() < 0.5:  # a master's kubelet stops answering while the others are replaced one at a time
            at, duration, pick = t + rng.uniform(30, 300), rng.uniform(300, 1800), rng.random()
            if at < d.end:
                d.add(at, "node_not_ready", duration=duration, master=1, pick=pick)


def _foreign(d: _Draw, p: Profile) -> None:
    """The ``foreign_terminate`` entries (``az``, ``target`` ``spare`` or ``any``, ``decrement`` 0/1): at random
    times, and after a share of the manual refreshes of a worker group, in their group; no draw at all when the
    profile has none."""
    rng = d.rng

    def add(at: float, az: str) -> None:
        d.add(at, "foreign_terminate", az=az, target="spare" if rng.random() < 0.75 else "any",
              decrement=int(rng.random() < 0.5))  # fmt: skip

    for t in d.poisson_times(p.foreign_terminates_per_day / DAY):
        add(t, rng.choice(p.azs))
    if p.foreign_after_refresh <= 0:
        return
    for f in sorted(f for f in d.out if f.kind == "manual_refresh" and f.param("az")):
        if rng.random() < p.foreign_after_refresh:
            at = f.at + rng.uniform(120, 2400)
            if at < d.end:  # none in the quiet tail
                add(at, str(f.param("az")))


def _kops_specs(d: _Draw, p: Profile) -> None:
    """The kOps spec entries (``kops_spec``: ``az``, ``below`` and ``above`` the group's size) and the manual
    refreshes' ``max_surge``; no draw at all when the profile has none of them."""
    rng = d.rng
    if p.spec_room > 0 and d.end > 0:
        for az in p.azs:
            if rng.random() < p.spec_room:
                d.add(0.0, "kops_spec", az=az, below=rng.randint(0, 1), above=rng.randint(1, 2))
    for t in d.poisson_times(p.kops_specs_per_day / DAY):
        d.add(t, "kops_spec", az=rng.choice(p.azs), below=rng.randint(0, 1), above=rng.randint(0, 2))
    if p.spec_after_refresh <= 0 and p.surge_two <= 0:
        return
    for i, f in enumerate(list(d.out)):
        if f.kind != "manual_refresh":
            continue
        if p.surge_two > 0 and rng.random() < p.surge_two:
            d.out[i] = Fault(f.at, f.kind, f.duration, tuple(sorted((*f.params, ("max_surge", 2)))))
        if p.spec_after_refresh > 0 and rng.random() < p.spec_after_refresh:
            at, below, above = f.at + rng.uniform(60, 1800), rng.randint(0, 1), rng.randint(0, 2)
            if at < d.end:  # none in the quiet tail
                d.add(at, "kops_spec", az=str(f.param("az")), below=below, above=above)


def _kops_resizes(d: _Draw, p: Profile) -> None:
    """The kOps resizes (``kops_spec`` with ``grow`` -2, -1, 1 or 2 besides ``below`` and ``above``): at random
    times, and inside a share of the outages (``resize_in_outage``); no draw at all when the profile has none."""
    rng = d.rng

    def add(at: float) -> None:
        d.add(at, "kops_spec", az=rng.choice(p.azs), below=rng.randint(0, 1), above=rng.randint(0, 2),
              grow=rng.choice((-2, -1, 1, 2)))  # fmt: skip

    for t in d.poisson_times(p.kops_resizes_per_day / DAY):
        add(t)
    if p.resize_in_outage <= 0:
        return
    for f in sorted(f for f in d.out if f.kind == "outage"):
        if rng.random() < p.resize_in_outage:
            at = rng.uniform(f.at, f.at + f.duration)
            if at < d.end:  # none in the quiet tail
                add(at)
