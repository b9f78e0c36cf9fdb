"""Structured JSON logs for the agent: one JSON object per line, with the command's id and node on every line
logged while that command is worked on.

The command context lives in ``contextvars`` (``command_context``); threads started for a command (the drain
engine's eviction workers and pod watcher) run in a copy of the starting thread's context, so their lines carry
it too. Fields of a line::

    {"time": "2024-03-05T10:15:31.123456+00:00", "level": "INFO", "logger": "agent.consumer",
     "thread": "command-3f2a9c1e", "message": "command started ...",
     "command_id": "spot-7e2b...", "instance_id": "i-0a1b...", "node": "ip-10-0-1-17.ec2.internal",
     "exception": "Traceback ..."}           # the last only when the record carries one

``LOG_FORMAT=text`` keeps the human-readable format (``TEXT_FORMAT``) with the same context appended.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TextIO

from adapters.aws.clients import SDK_LOGGERS
from core.settings import LogFormat

_MARK = "_node_manager_handler"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"

# The fields of the command being worked on in this context ({} outside a command).
_CONTEXT: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "node_manager_log_context", default=MappingProxyType({})
)


def current_context() -> dict[str, str]:
    """The log context of the calling thread/context (a copy)."""
    return dict(_CONTEXT.get())


@contextmanager
def command_context(**fields: str | None) -> Iterator[None]:
    """Add ``fields`` (``command_id``, ``instance_id``, ``node`` ...; None values are left out) to every log line
    of the ``with`` block, on top of the enclosing context."""
    merged = {**_CONTEXT.get(), **{k: str(v) for k, v in fields.items() if v is not None}}
    token = _CONTEXT.set(merged)
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line (fields in the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        line.update(_CONTEXT.get())
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT`` followed by the command context as ``key=value`` pairs."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = _CONTEXT.get()
        if not context:
            return text
        head, sep, tail = text.partition("\n")
        pairs = " ".join(f"{k}={v}" for k, v in context.items())
        return f"{head} [{pairs}]{sep}{tail}"


def configure(
    level: str = "INFO", fmt: LogFormat | str = LogFormat.JSON, stream: TextIO | None = None
) -> logging.Handler:
    """Send every log record to ``stream`` (default stderr) in ``fmt`` (``json`` or ``text``) at ``level``;
    quiets the SDKs' own loggers (``adapters.aws.clients.SDK_LOGGERS``) to WARNING. Replaces a handler an earlier
    call installed (others, such as a test's log capture, stay). Returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if LogFormat(fmt) is LogFormat.JSON else TextFormatter())
    setattr(handler, _MARK, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _MARK, False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return handler
