"""The interruption executor's moto world as its tests read it (the ``effects`` fixture itself is ``conftest``'s):
the time of its events (``NOW``), the one instance of its worker group, the messages sent to its queue, a drain
command, and a rebalance cordon recorded in its table (``record_cordon``)."""

from __future__ import annotations

from datetime import timedelta

from core.model import Command, CommandKind, DrainOptions
from lambdas.interruption.execute import Effects
from tests.unit.lambdas.interruption.decision_world import CLUSTER, T0

NOW = T0  # when the executor applies its plans


def instance(effects: Effects) -> str:
    groups = effects.aws.autoscaling.client.describe_auto_scaling_groups()["AutoScalingGroups"]
    return groups[0]["Instances"][0]["InstanceId"]


def messages(effects: Effects) -> list[dict]:
    queue = effects.aws.queue
    return queue.client.receive_message(QueueUrl=queue.queue_url, MaxNumberOfMessages=10).get("Messages", [])


def command(instance_id: str) -> Command:
    return Command(
        command_id="spot-ev",
        cluster="demo",
        kind="drain",
        instance_id=instance_id,
        deadline=NOW + timedelta(seconds=120),
    )


def record_cordon(effects: Effects, command_id: str, instance: str, status: str, resolution: str | None = None) -> None:
    """A rebalance cordon of ``instance`` recorded at ``T0`` with ``status`` (and ``resolution``), as the agent leaves
    it."""
    command = Command(
        command_id=command_id,
        cluster=CLUSTER,
        kind=CommandKind.CORDON,
        instance_id=instance,
        reason="rebalance-recommendation",
        deadline=T0 + timedelta(minutes=10),
        options=DrainOptions(uncordon_after_seconds=1800),
    )
    effects.store.record_command(command, ttl_seconds=3600, now=T0)
    updates = {"status": status, **({"resolution": resolution} if resolution else {})}
    effects.store.table.update_item(
        Key={"pk": effects.store.agent_pk, "sk": f"CMD#{command_id}"},
        UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in updates),
        ExpressionAttributeNames={f"#{k}": k for k in updates},
        ExpressionAttributeValues={f":{k}": v for k, v in updates.items()},
    )
