"""The in-memory table's writes sized by what they change (``Write.sized``, ``MemoryTable.sizing``), updates that
copy only what they change (``Update.apply``) and update requests checked once per shape (``sim.dynamo_calls``):
after any sequence of puts, updates (nested paths, list indexes, sets, conditions) and deletes, the size the table
keeps for an item is its ``item_bytes`` and its parts the ``value_bytes`` of its list, map and set attributes, no
write changed an item stored before it (a reader of the stored objects, ``copy_reads=False``, sees them as they
were), and every answer is the one a table that checks each request whole gives."""

import copy
from typing import Any

from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import dynamo_calls
from sim.dynamo import MemoryDynamo
from sim.faults import Faults
from sim.kernel import Kernel
from sim.values import item_bytes, value_bytes

K = {"pk": "p", "sk": "a"}
NAMES = {"#l": "l", "#m": "m", "#n": "n", "#s": "s", "#ss": "ss", "#t": "t", "#é": "é"}

# update expressions over a few attributes, nested paths included; the values each may use are below
UPDATES = [
    "SET #l = :l",
    "SET #l[0] = :n",
    "SET #l[5] = :s",
    "REMOVE #l[0]",
    "SET #m = :m",
    "SET #m.#n = :n, #m.#s = :s",
    "SET #m.#l = :l",
    "SET #m.#l[0] = :s",
    "REMOVE #m.#n",
    "SET #n = #n + :n",
    "SET #n = if_not_exists(#n, :n)",
    "SET #t = #l",
    "SET #t = list_append(#l, :l)",
    "SET #s = :s, #é = :m",
    "ADD #ss :ss",
    "DELETE #ss :ss",
    "ADD #n :n",
    "REMOVE #m, #l",
    "SET #é = :s REMOVE #t",
]
VALUES = {":l": [1, "two", {"x": [3]}], ":n": 7, ":s": "text", ":m": {"n": 1, "l": [1, 2]}, ":ss": {"a", "b"}}
PUTS = [
    {**K, "n": 1, "l": [0, 1], "m": {"n": 2, "l": ["a"]}},
    {**K, "s": "only a string"},
    {**K, "ss": {"a"}, "l": []},
]


def _used(text: str) -> tuple[dict[str, str], dict[str, Any]]:
    names = {k: v for k, v in NAMES.items() if k in text}
    values = {k: v for k, v in VALUES.items() if k in text}
    return names, values


def _write(table: Any, op: tuple[str, int]) -> Any:
    """What the write answered: its ``Attributes`` or its error's code and message."""
    kind, n = op
    try:
        if kind == "put":
            table.put_item(Item=PUTS[n % len(PUTS)])
        elif kind == "delete":
            table.delete_item(Key=K)
        elif kind == "conditional":  # a condition of boto3 objects among the request's own placeholders
            return table.update_item(
                Key=K,
                UpdateExpression="SET #s = :s",
                ExpressionAttributeNames={"#s": "s"},
                ExpressionAttributeValues={":s": f"at {n}"},
                ConditionExpression=Attr("n").between(n % 4, n % 9) | Attr("s").not_exists(),
                ReturnValues="ALL_NEW",
            ).get("Attributes")
        else:
            text = UPDATES[n % len(UPDATES)]
            names, values = _used(text)
            params: dict[str, Any] = {"Key": K, "UpdateExpression": text, "ExpressionAttributeNames": names}
            if values:
                params["ExpressionAttributeValues"] = values
            return table.update_item(**params, ReturnValues="UPDATED_NEW").get("Attributes")
    except ClientError as err:  # an update that cannot apply to the item as it is: refused, nothing written
        return err.response["Error"]["Code"], err.response["Error"]["Message"]
    return None


ops = st.lists(
    st.tuples(st.sampled_from(["put", "update", "update", "update", "conditional", "delete"]), st.integers(0, 40)),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_sizes_follow_every_write_and_stored_items_never_change(sequence: list[tuple[str, int]]) -> None:
    kernel = Kernel(seed=1)
    table = MemoryDynamo(kernel, Faults(kernel), copy_reads=False).table("state")
    whole = MemoryDynamo(kernel, Faults(kernel), copy_reads=False).table("state")  # each request checked whole
    seen: list[tuple[Any, Any]] = []  # every item stored, and a deep copy of it as it was stored
    for op in sequence:
        answer = _write(table, op)
        dynamo_calls._UPDATES.clear()
        assert _write(whole, op) == answer
        item = table.stored(("p", "a"))
        assert item == whole.stored(("p", "a"))
        size, parts = table.sizing(("p", "a"))
        if item is None:
            assert (size, parts) == (0, {})
            continue
        assert size == item_bytes(item)
        assert parts == {k: value_bytes(v) for k, v in item.items() if type(v) in (list, dict, set)}
        seen.append((item, copy.deepcopy(item)))
        assert all(stored == as_stored for stored, as_stored in seen)
