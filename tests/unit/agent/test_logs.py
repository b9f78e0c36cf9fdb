"""The agent's logs (``agent.logs``): JSON or text lines carrying the command's context, also from its threads."""

from __future__ import annotations

import io
import json
import logging
import threading

from agent.logs import JsonFormatter, TextFormatter, command_context, configure, current_context


def test_json_lines_carry_the_command_context_also_from_threads_started_in_it() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.agent.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        logger.info("outside")
        with command_context(command_id="spot-1", instance_id="i-0123456789abcdef0", node=None):
            with command_context(node="ip-10-0-1-17.ec2.internal"):
                import contextvars

                worker = threading.Thread(
                    target=contextvars.copy_context().run, args=(logger.info, "from a worker %d", 7), name="evict_0"
                )
                worker.start()
                worker.join()
                try:
                    raise RuntimeError("boom")
                except RuntimeError:
                    logger.exception("failed")
            assert current_context() == {"command_id": "spot-1", "instance_id": "i-0123456789abcdef0"}
        logger.info("after")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["outside", "from a worker 7", "failed", "after"]
    assert "command_id" not in lines[0] and "command_id" not in lines[3]
    for line in lines[1:3]:
        assert line["command_id"] == "spot-1" and line["node"] == "ip-10-0-1-17.ec2.internal"
        assert line["instance_id"] == "i-0123456789abcdef0"
    assert lines[1]["thread"] == "evict_0" and "RuntimeError: boom" in lines[2]["exception"]
    assert lines[0]["level"] == "INFO" and lines[0]["logger"] == "test.agent.logs" and "time" in lines[0]


def test_text_format_appends_the_context_and_configure_replaces_only_its_own_handler() -> None:
    record = logging.LogRecord("agent", logging.INFO, __file__, 1, "hello", None, None)
    with command_context(command_id="spot-1"):
        assert TextFormatter().format(record).endswith("hello [command_id=spot-1]")
    root = logging.getLogger()
    before = [h for h in root.handlers if not getattr(h, "_node_manager_handler", False)]  # e.g. pytest's capture
    level = root.level
    try:
        first = configure("INFO", "json", io.StringIO())
        second = configure("DEBUG", "text", io.StringIO())
        assert first not in root.handlers and second in root.handlers
        assert all(h in root.handlers for h in before)
    finally:
        root.removeHandler(second)
        root.setLevel(level)
