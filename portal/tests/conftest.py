"""The portal as production runs it: gunicorn on portal.settings.prod, secrets read from
``*_FILE`` paths, against the test database and Redis."""

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)


@dataclass
class ProdServer:
    url: str
    secret_key: str
    db_password: str
    metrics_token: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url(password: str, port: int | None = None) -> str:
    db = settings.DATABASES["default"]
    # The local Postgres trusts loopback, so any password works: what matters is that the
    # server holds one it must never show.
    return f"postgres://{db['USER']}:{password}@{db['HOST']}:{port or db['PORT']}/{db['NAME']}"


@pytest.fixture(scope="module")
def prod_server_factory(django_db_setup, tmp_path_factory):
    """start(database_port=None, redis_url=None) -> a running production server (on the test
    database and Redis unless told otherwise); all stopped afterwards."""
    started: list[subprocess.Popen] = []

    def start(database_port: int | None = None, redis_url: str | None = None) -> ProdServer:
        folder = tmp_path_factory.mktemp("prod")
        secret_key = secrets.token_urlsafe(60)
        db_password = f"db-pw-{secrets.token_hex(8)}"
        metrics_token = secrets.token_urlsafe(32)
        files = {
            "SECRET_KEY_FILE": secret_key,
            "DATABASE_URL_FILE": database_url(db_password, database_port),
            "REDIS_URL_FILE": redis_url or str(settings.CACHES["default"]["LOCATION"]),
            "PLATTER_METRICS_TOKEN_FILE": metrics_token,
        }
        hidden = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "PLATTER_METRICS_TOKEN", "DEBUG"}
        # Nor a connection pool another test of this process may have turned on: with one, a
        # server whose database is down waits PLATTER_DB_POOL_TIMEOUT for a connection.
        hidden |= {"PLATTER_DB_POOL", "PLATTER_DB_POOL_TIMEOUT", "DATABASE_CONN_MAX_AGE"}
        env = {key: value for key, value in os.environ.items() if key not in hidden}
        for name, value in files.items():
            path = folder / name.lower()
            path.write_text(value + "\n")
            path.chmod(0o600)
            env[name] = str(path)
        env.update(DJANGO_SETTINGS_MODULE="portal.settings.prod", ALLOWED_HOSTS="127.0.0.1")
        port = free_port()
        log = folder / "gunicorn.log"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "portal.wsgi",
                "-b",
                f"127.0.0.1:{port}",
                "-w",
                "1",
                "--access-logfile",
                "-",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        started.append(server)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not start:\n{log.read_text()}")
                time.sleep(0.2)
        return ProdServer(url, secret_key, db_password, metrics_token, log)

    yield start
    for server in started:
        server.terminate()
        server.wait(timeout=20)
