"""Where moto is not AWS (the notes of ``sides``): lifecycle actions, which moto does not implement, are held to AWS's
documentation on the simulation alone; the rules moto does not apply (MaxSize below MinSize, an unknown launch
template, a visibility change of a message not in flight) are asserted as moto answers them and as AWS does."""

from __future__ import annotations

import pytest

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.ports import Membership
from core.lifecycle import LifecycleAction
from sim.aws_state import TerminationHook
from tests.unit.adapters.aws.raising import Raising, client_error
from tests.unit.sim.aws_contract.sides import GROUP, TOKEN, UNKNOWN, Side, command, moto_side, outcome, sim_world


def test_moto_cannot_complete_a_lifecycle_action(monkeypatch: pytest.MonkeyPatch):
    """moto does not implement CompleteLifecycleAction / RecordLifecycleActionHeartbeat: in process (``mock_aws``) the
    call raises ``NotImplementedError``, its server answers HTTP 500 (FACTS.md). The simulation follows AWS instead
    (the tests below); when moto learns them, this test fails and the comparison can move to both sides."""
    with moto_side(monkeypatch) as moto:
        first, _ = moto.instances()
        action = LifecycleAction(instance_id=first, asg_name=GROUP, hook_name="node-manager-drain", token=TOKEN)
        with pytest.raises(NotImplementedError):
            moto.aws.autoscaling.complete_lifecycle_action(action)
        with pytest.raises(NotImplementedError):
            moto.aws.autoscaling.record_heartbeat(action)


def test_an_action_no_longer_active_is_reported_as_gone_like_the_adapter_does():
    """AWS answers ValidationError "No active Lifecycle Action found with instance ID ..." (API reference,
    CompleteLifecycleAction); the adapter turns it into False, and so does the simulation."""
    err = client_error("ValidationError", f"No active Lifecycle Action found with instance ID {UNKNOWN}")
    action = LifecycleAction(instance_id=UNKNOWN, asg_name=GROUP, hook_name="node-manager-drain", token=TOKEN)
    assert AutoScaling(Raising(err)).complete_lifecycle_action(action) is False
    assert AutoScaling(Raising(err)).record_heartbeat(action) is False
    _, _, aws, _ = sim_world(hooks=(TerminationHook("node-manager-drain"),))
    assert aws.autoscaling.complete_lifecycle_action(action) is False
    assert aws.autoscaling.record_heartbeat(action) is False


def test_a_termination_waits_on_the_hook_until_completed():
    """Terminating:Wait, the event, heartbeats, CompleteLifecycleAction (CONTINUE): "Amazon EC2 Auto Scaling lifecycle
    hooks"."""
    kernel, _, aws, events = sim_world(hooks=(TerminationHook("node-manager-drain", heartbeat_timeout=300),))
    first, _ = list(aws.cloud.groups[GROUP].members)
    assert aws.autoscaling.terminate_in_group(first, decrement=False) is True
    assert aws.autoscaling.membership(first) == Membership(GROUP, "Terminating:Wait")
    [event] = [e for e in events if e["detail-type"] == "EC2 Instance-terminate Lifecycle Action"]
    detail = event["detail"]
    action = LifecycleAction(
        instance_id=first, asg_name=GROUP, hook_name=detail["LifecycleHookName"], token=detail["LifecycleActionToken"]
    )
    kernel.run(250)
    assert aws.autoscaling.record_heartbeat(action) is True
    kernel.run(500)  # past the first heartbeat timeout, within the second
    assert aws.autoscaling.membership(first) == Membership(GROUP, "Terminating:Wait")
    assert aws.ec2.describe_instance(first).state == "running"
    wrong = action.model_copy(update={"token": "11111111-2222-4333-8444-555555555555"})
    assert aws.autoscaling.complete_lifecycle_action(wrong) is False
    assert aws.autoscaling.complete_lifecycle_action(action) is True
    assert aws.autoscaling.complete_lifecycle_action(action) is False  # no longer active
    kernel.run(600)
    assert aws.autoscaling.membership(first) is None
    assert aws.ec2.describe_instance(first).state == "terminated"


def test_a_hook_times_out_into_termination():
    kernel, _, aws, _ = sim_world(hooks=(TerminationHook("node-manager-drain", heartbeat_timeout=300),))
    first, _ = list(aws.cloud.groups[GROUP].members)
    aws.autoscaling.terminate_in_group(first, decrement=False)
    kernel.run(299)
    assert aws.autoscaling.membership(first) == Membership(GROUP, "Terminating:Wait")
    kernel.run(400)
    assert aws.autoscaling.membership(first) is None


def test_rules_moto_does_not_apply(side: Side):
    """MaxSize below MinSize, an unknown launch template, a visibility change of a message not in flight: AWS
    refuses (API references of UpdateAutoScalingGroup, DescribeLaunchTemplates, ChangeMessageVisibility); moto
    accepts, so only the simulation is held to it."""
    below = outcome(lambda: side.aws.autoscaling.set_capacity(GROUP, None, 0))
    unknown = outcome(lambda: side.aws.ec2.template_versions(["lt-0123456789abcdef0"]))
    side.aws.queue.send_command(command("i-0a1b2c3d4e5f60718"))
    [message] = side.aws.queue.receive(10, 0, 0)
    lapsed = outcome(lambda: side.aws.queue.set_visibility(message["ReceiptHandle"], 30))
    if side.name == "moto":
        assert (below, unknown, lapsed[0]) == (("ok", None), ("ok", {}), "ok")
    else:
        assert below == ("AwsRequestError", "ValidationError")
        assert unknown == ("AwsRequestError", "InvalidLaunchTemplateId.NotFound")
        assert lapsed == ("AwsRequestError", "AWS.SimpleQueueService.MessageNotInflight")
