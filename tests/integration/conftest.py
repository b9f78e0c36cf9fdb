"""Fixtures shared by the integration tests of more than one directory: ``endpoint``, the URL of a server that answers
every request with an unparseable body (``garbage_server.Garbage``), for the Lambdas' and the agent's clients."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.integration.garbage_server import Garbage


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
