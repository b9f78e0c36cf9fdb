"""Hostile input, property-based (hypothesis): the agent's message parser (``parse_message``) and the binding of a
body to its record (``bind_to_record``) meet any text, any JSON value and mutations of a real command body. Each is
sorted (RUN, FOREIGN, MALFORMED; bound or rejected with the reason said), never an exception, and a body bound to its
record runs the RECORDED command only."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis", reason="hypothesis (requirements-dev.txt) is not installed")

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.consumer.decisions import MessageVerdict, bind_to_record, parse_message
from core.model import Command
from tests.unit.agent.commands import spot_command
from tests.unit.lambdas.events.fuzz_values import json_values, mutated

EXAMPLES = 1500
CLUSTER = "demo"
RECORDED = spot_command().model_dump(mode="json")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200) | json_values.map(json.dumps) | mutated([RECORDED]).map(json.dumps))
def test_any_body_is_sorted_never_raised(body: str) -> None:
    parsed = parse_message(body, CLUSTER)
    if parsed.verdict is MessageVerdict.MALFORMED:
        assert parsed.command is None and parsed.why
    else:
        assert parsed.command is not None
        assert (parsed.verdict is MessageVerdict.RUN) == (parsed.command.cluster == CLUSTER)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated([RECORDED]), st.one_of(st.none(), json_values, mutated([{"command": RECORDED, "status": "queued"}])))
def test_a_body_runs_only_the_command_its_record_holds(claimed_raw: Any, item: Any) -> None:
    parsed = parse_message(json.dumps(claimed_raw), CLUSTER)
    if parsed.command is None:
        return
    record = item if isinstance(item, dict) or item is None else {"command": item}
    binding = bind_to_record(parsed.command, record)
    if binding.command is None:
        assert binding.rejection is not None and binding.why
    else:
        assert binding.rejection is None
        assert record is not None and binding.command == Command.model_validate(record["command"])  # the stored one
        assert binding.command.instance_id == parsed.command.instance_id  # only the instance the body names
