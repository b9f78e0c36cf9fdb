"""``agent.consumer.jobs.Jobs``: which starts may retake a command this worker's own failed handback left running."""

from __future__ import annotations

from agent.consumer.jobs import Job, Jobs
from tests.unit.agent.consumer_world import command


def test_a_start_may_retake_only_when_no_job_and_no_other_start_holds_the_command_here() -> None:
    jobs = Jobs()
    assert jobs.begin_start("spot-1")  # first delivery: free
    assert not jobs.begin_start("spot-1")  # a duplicate handled at once by another thread: not free
    jobs.end_start("spot-1")
    job = Job("m-1", "r-1", command(), 1)
    jobs.add(job)
    jobs.end_start("spot-1")
    assert jobs.holds("spot-1") and not jobs.begin_start("spot-1")  # a live job holds it
    jobs.end_start("spot-1")
    jobs.remove(job)
    assert not jobs.holds("spot-1") and jobs.begin_start("spot-1")  # its job ended: free again
