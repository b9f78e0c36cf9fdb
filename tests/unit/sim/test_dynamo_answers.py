"""A Query asked again of the in-memory table (``sim.dynamo_query.Answers``: an answer kept while nobody wrote in the
partition or sort key group it read) answers what DynamoDB answers: random sequences of writes (PutItem, UpdateItem,
DeleteItem, TransactWriteItems) into two partitions of sort keys of a few groups, and Queries of every key condition
form, filter, page size and direction, each asked again and again, give the same items as moto's table and, in
full (counts, pages, last keys), as the same table with no answer kept; an answer changed by its caller changes no
later answer.
"""

import itertools
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from unittest.mock import patch

import boto3
import pytest
from boto3.dynamodb.conditions import (
    And,
    Attr,
    AttributeExists,
    AttributeNotExists,
    BeginsWith,
    Between,
    ConditionBase,
    ConditionExpressionBuilder,
    Equals,
    In,
    Key,
    LessThan,
    Not,
    NotEquals,
    Or,
    Size,
)
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from core.schema import state_table
from sim import dynamo_query
from sim.dynamo import MemoryDynamo, MemoryTable
from sim.faults import Faults
from sim.kernel import Kernel

# sort keys of the groups "A#", "AB#", "B#" and of the one-key groups "A", "B", "AB" (``sort_key_group``)
SKS = ["A", "A#", "A#a", "A#b", "AB", "AB#a", "B", "B#a", "B#b#c"]
BOUNDS = [*SKS, "", "A#a#", "B#b", "C"]
_names = itertools.count()

sks = st.sampled_from(SKS)
pks = st.sampled_from(["p", "q"])
numbers = st.integers(0, 2)
put = st.tuples(st.just("put"), pks, sks, numbers)
update = st.tuples(st.just("update"), pks, sks, numbers)
delete = st.tuples(st.just("delete"), pks, sks)
transact = st.tuples(st.just("transact"), pks, st.lists(st.tuples(sks, numbers), min_size=1, max_size=2))
sort_conditions = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["eq", "lt", "lte", "gt", "gte"]), st.sampled_from(BOUNDS[:-4] + BOUNDS[-3:])),
    st.tuples(st.just("between"), st.sampled_from(BOUNDS[:-4]), st.sampled_from(BOUNDS[:-4])),
    st.tuples(st.just("begins_with"), st.sampled_from(["A", "A#", "A#a", "AB", "B#", "B#b#", "C#"])),
)
filters = st.one_of(st.none(), numbers.map(lambda n: ("eq", n)), st.just(("exists",)))
query = st.tuples(st.just("query"), pks, sort_conditions, filters, st.sampled_from([0, 1, 2]), st.booleans())
operations = st.lists(st.one_of(put, update, delete, transact, query, query), min_size=1, max_size=14)


def request(pk: str, sort: tuple[Any, ...] | None, keep: tuple[Any, ...] | None, limit: int, forward: bool) -> Any:
    key = Key("pk").eq(pk)
    if sort is not None:
        if sort[0] == "between":
            low, high = sorted(sort[1:])
            key = key & Key("sk").between(low, high)
        else:
            key = key & getattr(Key("sk"), sort[0])(sort[1])
    params: dict[str, Any] = {"KeyConditionExpression": key, "ScanIndexForward": forward}
    if keep is not None:
        params["FilterExpression"] = Attr("v").eq(keep[1]) if keep[0] == "eq" else Attr("v").exists()
    if limit:
        params["Limit"] = limit
    return params


def pages(table: Any, params: dict[str, Any]) -> list[Any]:
    """Every page of a Query (metadata and moto's ConsumedCapacity left out), following LastEvaluatedKey."""
    out = []
    while True:
        got = table.query(**params)
        out.append({k: v for k, v in got.items() if k not in ("ResponseMetadata", "ConsumedCapacity")})
        if "LastEvaluatedKey" not in got or len(out) > 12:
            return out
        params = {**params, "ExclusiveStartKey": got["LastEvaluatedKey"]}


def call(table: Any, op: tuple[Any, ...]) -> Any:
    kind, pk = op[0], op[1]
    if kind == "put":
        return table.put_item(Item={"pk": pk, "sk": op[2], "v": op[3]})
    if kind == "update":
        return table.update_item(
            Key={"pk": pk, "sk": op[2]}, UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": op[3]}
        )
    if kind == "delete":
        return table.delete_item(Key={"pk": pk, "sk": op[2]})
    if kind == "transact":
        writes = dict(op[2])  # one action per item
        items = [{"Put": {"TableName": table.name, "Item": {"pk": pk, "sk": sk, "v": v}}} for sk, v in writes.items()]
        return table.meta.client.transact_write_items(TransactItems=items)
    return pages(table, request(*op[1:]))


def answers(table: Any, ops: list[tuple[Any, ...]], full: bool) -> list[Any]:
    out: list[Any] = []
    for op in ops:
        try:
            got = call(table, op)
        except ClientError as err:
            out.append(err.response["Error"]["Code"])
            continue
        if op[0] != "query":
            continue
        # with moto the items of all pages: a page that ends at the Limit carries a LastEvaluatedKey on DynamoDB (and on
        # the in-memory table) even when no item follows, not on moto; in full with the table itself
        out.append(got if full else [item for page in got for item in page["Items"]])
    return out


def memory(name: str = "state", copy_reads: bool = True) -> MemoryTable:
    kernel = Kernel(seed=0)
    return MemoryDynamo(kernel, Faults(kernel), copy_reads=copy_reads).table(name)


@pytest.fixture(scope="module")
def moto_resource() -> Iterator[Any]:
    with mock_aws():
        yield boto3.resource("dynamodb", region_name="us-east-1")


def asked_again(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``ops`` with each Query asked twice more: once at once, once after everything else."""
    queries = [op for op in ops if op[0] == "query"]
    return [*itertools.chain.from_iterable([op, op] if op[0] == "query" else [op] for op in ops), *queries]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_queries_asked_again_answer_as_moto(moto_resource: Any, ops: list[tuple[Any, ...]]) -> None:
    ops = asked_again(ops)
    name = f"answers-{next(_names)}"
    moto_resource.create_table(**state_table(name))
    assert answers(memory(name), ops, full=False) == answers(moto_resource.Table(name), ops, full=False)


@settings(max_examples=300, deadline=None)
@given(ops=operations, copy_reads=st.booleans())
def test_queries_asked_again_answer_as_the_table_keeping_none(ops: list[tuple[Any, ...]], copy_reads: bool) -> None:
    ops = asked_again(ops)
    kept = answers(memory(copy_reads=copy_reads), ops, full=True)
    with patch.object(dynamo_query, "request_of", lambda params: None):
        assert kept == answers(memory(copy_reads=copy_reads), ops, full=True)


@pytest.mark.parametrize("copy_reads", [True, False])
def test_an_answer_its_caller_changes_changes_no_later_answer(copy_reads: bool) -> None:
    table = memory(copy_reads=copy_reads)
    table.put_item(Item={"pk": "p", "sk": "A#a", "v": 1})
    table.put_item(Item={"pk": "p", "sk": "A#b", "v": 2})
    params = {"KeyConditionExpression": Key("pk").eq("p") & Key("sk").begins_with("A#")}
    first = table.query(**params)
    first["Items"].append({"pk": "p", "sk": "A#z"})
    if copy_reads:
        first["Items"][0]["v"] = 9
    with patch.object(dynamo_query, "_read", side_effect=AssertionError("not kept")):
        again = table.query(**params)
    assert [item["sk"] for item in again["Items"]] == ["A#a", "A#b"] and again["Items"][0]["v"] == 1
    assert again["Count"] == again["ScannedCount"] == 2 and again["Items"] is not first["Items"]


def test_a_write_elsewhere_keeps_an_answer_and_one_in_its_group_does_not() -> None:
    table = memory()
    table.put_item(Item={"pk": "p", "sk": "A#a"})
    params = {"KeyConditionExpression": Key("pk").eq("p") & Key("sk").between("A#", "A#z")}
    reads = []
    real = dynamo_query._read

    def counted(*args: Any) -> Any:
        reads.append(1)
        return real(*args)

    with patch.object(dynamo_query, "_read", counted):
        table.query(**params)
        table.put_item(Item={"pk": "p", "sk": "B#a"})  # another group
        table.put_item(Item={"pk": "q", "sk": "A#b"})  # another partition
        assert table.query(**params)["Count"] == 1 and len(reads) == 1
        table.put_item(Item={"pk": "p", "sk": "A#b"})
        assert table.query(**params)["Count"] == 2 and len(reads) == 2
        table.delete_item(Key={"pk": "p", "sk": "A#a"})
        assert table.query(**params)["Count"] == 1 and len(reads) == 3
        # a range over two groups reads the partition: any write in it is news
        wide = {"KeyConditionExpression": Key("pk").eq("p") & Key("sk").between("A#", "B#z")}
        table.query(**wide)
        table.put_item(Item={"pk": "p", "sk": "AB"})
        assert table.query(**wide)["Count"] == 3 and len(reads) == 5


# request keys (``dynamo_query.request_of``): small condition trees of str values, so that many share a key
_attribute_names = st.sampled_from(["pk", "a", "a.b", "c[1]"])
_texts = st.sampled_from(["", "a", "pk"])  # some values the names of attributes
_attributes = st.one_of(st.builds(Key, _attribute_names), st.builds(Attr, _attribute_names))
_operands = st.one_of(_texts, _texts, _attributes)
_leaves = st.one_of(
    st.builds(
        lambda kind, a, v: kind(a, v),
        st.sampled_from([Equals, NotEquals, LessThan, BeginsWith]),
        _attributes,
        _operands,
    ),
    st.builds(Between, _attributes, _operands, _operands),
    st.builds(In, _attributes, st.lists(_texts, max_size=2) | st.tuples(_texts) | _texts),
    st.builds(lambda kind, a: kind(a), st.sampled_from([AttributeExists, AttributeNotExists]), _attributes),
    st.builds(lambda a, v: Equals(Size(a), v), _attributes, _operands),
)
_trees = st.recursive(
    _leaves,
    lambda inner: st.builds(And, inner, inner) | st.builds(Or, inner, inner) | st.builds(Not, inner),
    max_leaves=3,
)
_requests = st.fixed_dictionaries(
    {"KeyConditionExpression": _trees},
    optional={"FilterExpression": _trees, "Limit": st.sampled_from([1, True]), "ScanIndexForward": st.booleans()},
)


def _built(params: dict[str, Any]) -> Any:
    """What boto3 sends for a request: each field as its builder builds it (one builder, in its order), or what it
    raises; the other parameters with their types."""
    builder = ConditionExpressionBuilder()
    out: list[Any] = []
    for field in ("KeyConditionExpression", "FilterExpression"):
        if field in params:
            try:
                got = builder.build_expression(params[field], is_key_condition=field == "KeyConditionExpression")
            except Exception as err:  # noqa: BLE001  # what the builder raises is part of what it answers
                return type(err).__name__
            values = [(k, type(v), v) for k, v in got.attribute_value_placeholders.items()]
            out.append((field, got.condition_expression, got.attribute_name_placeholders, values))
    return out, sorted(
        (k, type(v), v) for k, v in params.items() if k not in ("KeyConditionExpression", "FilterExpression")
    )


_SWAPS = ((Equals, NotEquals, LessThan, BeginsWith), (AttributeExists, AttributeNotExists), (And, Or))


def _changed(draw: st.DrawFn, part: Any, at: int) -> Any:
    """``part`` with its ``at``-th node (depth first, ``part`` itself the 0th) changed in one way: a condition's class
    for another of the same arity, or its parts turned round; an attribute's class or name, or a value for it; a
    value for another or an attribute; an IN's list for another length, a tuple or a string."""
    count = [0]

    def again(node: Any) -> Any:
        changed = count[0] == at
        count[0] += 1
        if isinstance(node, Size):
            return Size(draw(_attributes)) if changed else node  # (boto3 makes a Size of an attribute only)
        if isinstance(node, ConditionBase):
            kind, inside = type(node), list(node._values)
            if changed and draw(st.booleans()):
                kind = draw(st.sampled_from(next((s for s in _SWAPS if kind in s), (kind,))))
            elif changed:
                inside = inside[1:] + inside[:1]
            return kind(*map(again, inside))
        if changed and isinstance(node, list | tuple | str) and draw(st.booleans()):
            return draw(st.sampled_from([[*node, "a"], list(node)[1:], tuple(node), "ab"]))
        if changed and isinstance(node, str):  # a value for an attribute, of its very name at times
            return draw(st.sampled_from([Attr(node), Key(node)]) | _operands)
        if changed and isinstance(node, Attr | Key):  # an attribute for a value, its very name at times
            return draw(st.just(node.name) | _operands)
        return draw(_operands) if changed else node

    return again(part)


def _size(part: Any) -> int:
    return 1 + sum(map(_size, part._values)) if isinstance(part, ConditionBase) else 1


@st.composite
def _alike(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A request and a few others each changed in one node of one field or in one other parameter."""
    first = draw(_requests)
    out = [first]
    for _ in range(draw(st.integers(1, 5))):
        field = draw(st.sampled_from(sorted(first)))
        value = first[field]
        if field in ("KeyConditionExpression", "FilterExpression"):
            value = _changed(draw, value, draw(st.integers(0, _size(value) - 1)))
        else:
            value = draw(st.sampled_from([1, 2, True, False]))
        out.append({**first, field: value})
    return out


@settings(max_examples=400, deadline=None)
@given(_alike())
def test_requests_with_the_same_key_are_built_alike(requests: list[dict[str, Any]]) -> None:
    keyed = [(dynamo_query.request_of(r), r) for r in requests]
    for (key, first), (other, second) in itertools.combinations(keyed, 2):
        if key is not None and key == other:
            assert _built(first) == _built(second)


def test_a_condition_the_key_cannot_tell_is_never_kept() -> None:
    odd = Key("pk").eq("a")
    odd.expression_operator = "<>"  # type: ignore[assignment]  # boto3-stubs: a Literal
    own = type("Own", (Equals,), {})  # a class of one's own
    emptied = Key("pk").eq("a")
    emptied.__dict__.clear()
    emptied.parts = ("a",)  # type: ignore[attr-defined]  # one attribute, not its parts
    kept = [odd, own(Key("pk"), "a"), Key("pk").eq("a") & Attr("sk").eq("b"), Key("pk").eq(1), emptied]
    for keep in kept:
        assert dynamo_query.request_of({"KeyConditionExpression": keep}) is None
    for keep in [Attr("s").is_in("ab"), Attr("s").eq(Decimal(1)), Attr("s").eq(["a"])]:
        assert dynamo_query.request_of({"KeyConditionExpression": Key("pk").eq("a"), "FilterExpression": keep}) is None
    assert dynamo_query.request_of({"KeyConditionExpression": Key("pk").eq("a"), "Select": "COUNT"}) is None
    assert dynamo_query.request_of({"KeyConditionExpression": Key("pk").eq("a")}) is not None
