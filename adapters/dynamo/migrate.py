"""Moving a cluster's agent items from the old one-partition layout to the agent partition (once, on upgrade).

Until the agent's role was limited to its own items, every item of a cluster was in ``CLUSTER#<cluster>``. The
kinds the agent writes (``core.schema.AGENT_ITEM_PREFIXES``: ``NODE#``, ``MEMBERSHIP``, ``CMD#``, ``HOOK#``,
``CPDRAIN#``) now live in ``CLUSTER#<cluster>#AGENT``, and ``adapters.dynamo.table`` reads each kind from its own
partition only, so an item left in the old place is never read again. ``move_agent_items`` copies each such item to
the agent partition (unless an item with that key is already there: one written since the upgrade is newer and
kept) and then deletes the old one. It is idempotent: run again, it finds nothing left to move.

It uses the operator's credentials (``node-manager migrate-table``): the agent's role may not touch the old
partition, and the Lambdas never migrate on their own.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from boto3.dynamodb.conditions import Attr, Key

from adapters.dynamo.table import TABLE_ERRORS, translate
from core.exceptions import ConflictError
from core.schema import AGENT_ITEM_PREFIXES, agent_item, agent_partition_of, partition_of


def kind_of(sk: str) -> str:
    """The item kind of sort key ``sk`` (its ``AGENT_ITEM_PREFIXES`` entry)."""
    return next(prefix for prefix in AGENT_ITEM_PREFIXES if sk.startswith(prefix))


def move_agent_items(table: Any, cluster: str) -> dict[str, Counter[str]]:
    """Move ``cluster``'s agent items out of its cluster partition (module docstring).

    Args:
        table: a boto3 ``dynamodb.Table`` resource of the state table.
        cluster: the cluster name.

    Returns:
        ``{"moved": Counter(kind), "kept": Counter(kind)}``: items copied to the agent partition, and items not
        copied because the agent partition already had one with that key (the old one is deleted either way).

    Raises:
        StoreUnavailableError, AwsRequestError: a call failed; what was moved before it stays moved, and a second
        run finishes the rest.
    """
    old, new = partition_of(cluster), agent_partition_of(cluster)
    moved: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    kwargs: dict[str, Any] = {"KeyConditionExpression": Key("pk").eq(old), "ConsistentRead": True}
    while True:
        try:
            page = table.query(**kwargs)
        except TABLE_ERRORS as err:
            raise translate(err, f"query {old}") from err
        for item in page.get("Items", []):
            sk = str(item["sk"])
            if not agent_item(sk):
                continue
            try:
                table.put_item(Item={**item, "pk": new}, ConditionExpression=Attr("pk").not_exists())
                moved[kind_of(sk)] += 1
            except TABLE_ERRORS as err:
                error = translate(err, f"copy {sk}")
                if not isinstance(error, ConflictError):
                    raise error from err
                kept[kind_of(sk)] += 1
            try:
                table.delete_item(Key={"pk": old, "sk": sk})
            except TABLE_ERRORS as err:
                raise translate(err, f"delete old {sk}") from err
        if "LastEvaluatedKey" not in page:
            return {"moved": moved, "kept": kept}
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
