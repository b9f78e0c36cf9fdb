"""A real HTTP server on 127.0.0.1 answering every request with one status (``Garbage.status``) and an unclosed HTML
page no XML or JSON parser reads, as a proxy or a load balancer may (``endpoint``, the fixture of ``conftest``, gives
its URL): the server of the unparseable-answer tests of the Lambdas' and the agent's clients."""

from __future__ import annotations

import http.server
from typing import Any

BODY = b"<html><body><h1>502 Bad Gateway</h1>"  # unclosed: no XML or JSON parser reads it


class Garbage(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(type(self).status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass
