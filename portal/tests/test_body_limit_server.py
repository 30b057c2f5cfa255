"""Bodies bounded on the real web server, as production serves the portal (gunicorn with
deploy/gunicorn.conf.py's uvicorn workers, portal.asgi:application): an anonymous chunked
200 MB POST to the sign-in page gets 413 within its first few MB, and a declared 2 GB one gets it
before sending a byte of its body (issue 41)."""

import os
import select
import socket
import subprocess
import time

import pytest
from django.conf import settings

from apps.lab import devservers
from apps.lab.tests.test_devservers import free_port
from conftest import _database_url

LIMIT = 1024 * 1024
PART = 64 * 1024


@pytest.fixture(scope="module")
def web_server(django_db_setup, tmp_path_factory):
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        "GUNICORN_WORKERS": "1",
        "PLATTER_MAX_REQUEST_BYTES": str(LIMIT),
    }
    # The application production serves (the Dockerfile's command names only the config).
    command = [*devservers.web_command(address)[:-1], "portal.asgi:application"]
    log = (tmp_path_factory.mktemp("web") / "web.log").open("w")
    server = subprocess.Popen(
        command,
        cwd=devservers.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # stop_process stops the whole group
    )
    try:
        devservers.wait_for_web(address, server)
        yield address
    finally:
        devservers.stop_process(server)
        log.close()


def post(address: str, headers: str, parts) -> tuple[int, bytes]:
    """Send the request's head, then its body `parts` while the server still takes them and has
    not answered; return the body bytes yielded to it and the answer (status line and all)."""
    host, port = address.rsplit(":", 1)
    sent = 0
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        # Little buffered on this side: what was sent is close to what the server took.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PART)
        sock.sendall(headers.encode())
        deadline = time.monotonic() + 20
        for data, frame in parts:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable or time.monotonic() > deadline:
                break  # the answer (or the close) came
            sent += len(data)  # yielded to the server (it may have taken only part of it)
            try:
                sock.sendall(frame)
            except (BrokenPipeError, ConnectionResetError):
                break
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass  # the server closed with our unread bytes: its answer came before
    return sent, answer


def chunked(total: int):
    data = b"x" * PART
    for _ in range(total // PART):
        yield data, f"{len(data):x}\r\n".encode() + data + b"\r\n"
    yield b"", b"0\r\n\r\n"


def head(address: str, framing: str) -> str:
    return (
        f"POST /accounts/login/ HTTP/1.1\r\nHost: {address}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\n{framing}\r\n\r\n"
    )


def test_a_chunked_200_mb_post_gets_413_within_its_first_few_mb(web_server):
    sent, answer = post(
        web_server, head(web_server, "Transfer-Encoding: chunked"), chunked(200 * 1024 * 1024)
    )
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert f"larger than {LIMIT} bytes".encode() in answer
    assert LIMIT < sent < 5 * 1024 * 1024, sent


def test_a_declared_2_gb_post_gets_413_before_its_body(web_server):
    sent, answer = post(web_server, head(web_server, f"Content-Length: {2 * 1024**3}"), [])
    assert sent == 0 and answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def test_a_small_post_still_reaches_the_sign_in_page(web_server):
    body = b"username=alice&password=x"
    _, answer = post(
        web_server,
        head(web_server, f"Content-Length: {len(body)}\r\nConnection: close"),
        [(body, body)],
    )
    # Django answered it (no CSRF cookie: 403), not the limit.
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
