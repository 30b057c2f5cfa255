"""The private servers really start, are reused when running, and stop cleanly."""

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from portal import devservers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def scratch():
    # Not under pytest's tmp_path: that is private to root and the 'postgres' user must enter.
    folder = Path(tempfile.mkdtemp(prefix="platter-devservers-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_fresh_postgres_starts_with_the_platter_database_is_reused_and_stops(scratch):
    server = devservers.Postgres(data_dir=scratch / "postgres" / "data", port=free_port())
    try:
        assert server.up() is True
        assert server.up() is False, "a running server must be reused, not started twice"
        result = subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-p",
                str(server.port),
                "-U",
                "platter",
                "-tAc",
                "select current_database()",
                "platter",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout.strip() == "platter"
    finally:
        server.down()
    assert server.running() is False


def test_redis_starts_is_reused_and_stops(scratch):
    server = devservers.Redis(data_dir=scratch / "redis", port=free_port())
    try:
        assert server.up() is True
        assert server.up() is False
        with socket.create_connection(("127.0.0.1", server.port)) as conn:
            conn.sendall(b"PING\r\n")
            assert conn.recv(16) == b"+PONG\r\n"
    finally:
        server.down()
    assert server.running() is False


def test_given_urls_mean_nothing_is_started_here(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://elsewhere/db")
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere/0")
    assert devservers.managed() == []
    monkeypatch.delenv("REDIS_URL")
    assert [type(s).__name__ for s in devservers.managed()] == ["Redis"]
