"""A node boundary without a Docker daemon: an HTTP server on a unix socket that answers every
call as Docker does for a container it does not have (404). A node row whose endpoint is this
socket reads logs as a real node without the container would: the API answers 409."""

import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest


class NoSuchContainer(BaseHTTPRequestHandler):
    def answer(self) -> None:
        body = json.dumps({"message": "No such container"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, *args) -> None:
        pass  # (its default formats a TCP client address)


@pytest.fixture
def docker_stub(tmp_path: Path) -> Iterator[str]:
    """The endpoint (unix://…) of a stub that knows no container."""
    path = tmp_path / "docker.sock"
    server = socketserver.ThreadingUnixStreamServer(str(path), NoSuchContainer)
    # shutdown() waits for the loop's next poll: at the default 0.5 s, ~0.25 s a test.
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"unix://{path}"
    server.shutdown()
    server.server_close()
