"""The project's private PostgreSQL and Redis, kept under the state folder, and the web server
as `./platter run` starts it (gunicorn with uvicorn workers, as in production).

Both listen on loopback ports of their own so they never clash with system services. A server
that is already running is reused. ``DATABASE_URL`` / ``REDIS_URL`` in the environment mean
"use that server instead", and then nothing is started here.

Used without Django settings (it runs before the database exists):
    python -m apps.lab.devservers up|down|status
"""

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent.parent
STATE_DIR = Path(os.environ.get("PLATTER_STATE_DIR", BASE_DIR / ".local"))
POSTGRES_PORT = int(os.environ.get("PLATTER_POSTGRES_PORT", "55432"))
REDIS_PORT = int(os.environ.get("PLATTER_REDIS_PORT", "56379"))
HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """A private server could not be started; the message says what to do."""


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(host, port):
            return
        time.sleep(0.1)
    raise ServerError(f"{what} did not start listening on {host}:{port} within {seconds:.0f} s")


def postgres_bin(tool: str) -> str:
    """Debian keeps the server tools out of PATH, under /usr/lib/postgresql/<major>/bin."""
    found = shutil.which(tool)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    for bindir in reversed(versions):
        if (bindir / tool).exists():
            return str(bindir / tool)
    raise ServerError(f"{tool} not found: apt-get install -y postgresql")


def _as_postgres_user() -> list[str]:
    # initdb and postgres refuse to run as root; run them as the unprivileged 'postgres' user.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"]
    return []


def _postgres_home(state_dir: Path | None = None) -> Path:
    """Where the cluster lives: under the state folder, unless the 'postgres' user cannot reach it
    (a checkout under a private folder), then under /var/lib/platter/<state folder id>.

    The fallback is keyed on the state folder, not the checkout: a portal of its own (the fault
    suite, a scratch run) has a state folder of its own and so a data directory of its own."""
    state_dir = (state_dir or STATE_DIR).resolve()
    home = state_dir / "postgres"
    if os.geteuid() != 0:
        return home
    probe = subprocess.run(
        ["runuser", "-u", "postgres", "--", "test", "-x", str(state_dir.parent)], check=False
    )
    if probe.returncode == 0:
        return home
    return fallback_postgres_home(state_dir)


def fallback_postgres_home(state_dir: Path) -> Path:
    """The data folder's home outside a private checkout: one per state folder."""
    state_id = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return Path("/var/lib/platter") / state_id / "postgres"


@dataclass
class Postgres:
    data_dir: Path = field(default_factory=lambda: _postgres_home() / "data")
    port: int = POSTGRES_PORT

    @property
    def url(self) -> str:
        return f"postgres://platter@{HOST}:{self.port}/platter"

    def running(self) -> bool:
        return port_open(HOST, self.port)

    def up(self) -> bool:
        """Start the cluster if needed; True when this call started it."""
        if self.running():
            return False
        fresh = self._init()
        log = self.data_dir.parent / "postgres.log"
        options = f"-p {self.port} -h {HOST} -k {self.data_dir}"
        self._pg_ctl("start", "-w", "-l", str(log), "-o", options)
        wait_for_port(HOST, self.port, "PostgreSQL")
        if fresh:
            subprocess.run(
                [
                    postgres_bin("createdb"),
                    "-h",
                    HOST,
                    "-p",
                    str(self.port),
                    "-U",
                    "platter",
                    "platter",
                ],
                check=True,
            )
        return True

    def down(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            self._pg_ctl("stop", "-w", "-m", "fast", check=False)

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        command = [*_as_postgres_user(), postgres_bin("pg_ctl"), "-D", str(self.data_dir), *args]
        subprocess.run(command, check=check, stdout=subprocess.DEVNULL)

    def _init(self) -> bool:
        """Create the cluster on first use; True when it was created now."""
        if (self.data_dir / "PG_VERSION").exists():
            return False
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            for folder in (self.data_dir.parent, self.data_dir):
                shutil.chown(folder, "postgres", "postgres")
        # Trust on loopback only: a private development cluster of this checkout.
        subprocess.run(
            [
                *_as_postgres_user(),
                postgres_bin("initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "platter",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            # Tuned for a disposable dev/test cluster: throughput over crash safety.
            conf.write(
                "\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 300\nshared_buffers = 256MB\n"
            )
        return True


@dataclass
class Redis:
    data_dir: Path = STATE_DIR / "redis"
    port: int = REDIS_PORT

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def running(self) -> bool:
        return port_open(HOST, self.port)

    def up(self) -> bool:
        if self.running():
            return False
        server = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(server).exists():
            raise ServerError("redis-server not found: apt-get install -y redis-server")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                server,
                "--port",
                str(self.port),
                "--bind",
                HOST,
                "--save",
                "",
                "--appendonly",
                "no",
                # The test runs' pytest-xdist processes take databases 16-63 (settings/test.py).
                "--databases",
                "64",
                "--daemonize",
                "yes",
                "--dir",
                str(self.data_dir),
                "--pidfile",
                str(self.data_dir / "redis.pid"),
                "--logfile",
                str(self.data_dir / "redis.log"),
            ],
            check=True,
        )
        wait_for_port(HOST, self.port, "Redis")
        return True

    def down(self) -> None:
        pidfile = self.data_dir / "redis.pid"
        if pidfile.exists() and self.running():
            subprocess.run(
                ["redis-cli", "-p", str(self.port), "shutdown", "nosave"],
                check=False,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )


# ---------------------------------------------------------------- the web server


def web_command(address: str) -> list[str]:
    """gunicorn as production runs it (deploy/gunicorn.conf.py: uvicorn workers, timeouts,
    worker recycling), bound to `address`, serving the app of web_application()."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        str(BASE_DIR / "deploy" / "gunicorn.conf.py"),
        "--bind",
        address,
        "apps.lab.devservers:web_application()",
    ]


def web_application():  # an ASGI callable; Django is imported only here
    """The portal with /static/ served from the apps' folders, as runserver serves it: in
    production a reverse proxy serves collectstatic's copy (deploy/Caddyfile)."""
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from portal.asgi import django_application, with_websockets
    from portal.body_limit import bounded_bodies

    return with_websockets(bounded_bodies(ASGIStaticFilesHandler(django_application())))


def start_web(address: str, env: dict[str, str], log=None) -> subprocess.Popen:
    """The web server in a process group of its own (stop it with stop_process): Ctrl-C in
    the terminal reaches only `./platter`, which stops its children in order."""
    return subprocess.Popen(
        web_command(address),
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=log and subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_web(address: str, process: subprocess.Popen, seconds: float = 60) -> None:
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + seconds
    while not port_open(host, int(port)):
        if process.poll() is not None:
            raise ServerError(f"the web server exited (code {process.returncode})")
        if time.monotonic() > deadline:
            raise ServerError(f"the web server did not listen on {address} within {seconds} s")
        time.sleep(0.2)


def stop_process(process: subprocess.Popen, seconds: float = 30) -> None:
    """SIGTERM (a graceful stop: gunicorn finishes its requests, Celery its tasks), then
    SIGKILL to the whole process group (workers of a stuck parent too)."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=seconds)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # none left: fine
        os.killpg(process.pid, signal.SIGKILL)  # children it left behind, or itself
    process.wait()


# ---------------------------------------------------------------- which servers


def managed() -> list[Postgres | Redis]:
    """The servers this checkout runs itself: none for which a URL was given."""
    servers: list[Postgres | Redis] = []
    if not os.environ.get("DATABASE_URL"):
        servers.append(Postgres())
    if not os.environ.get("REDIS_URL"):
        servers.append(Redis())
    return servers


# The test settings give pytest-xdist's processes Redis databases 16-63 (portal/settings/test.py).
TEST_REDIS_DATABASES = 64


def redis_databases() -> int:
    """How many databases the Redis in use has (16, Redis's default, when it will not say):
    one this checkout did not start, or started before it asked for 64, may have fewer."""
    import redis  # the venv's; this module otherwise runs on the standard library

    url = os.environ.get("REDIS_URL") or Redis().url
    try:
        answer = redis.Redis.from_url(url, socket_timeout=5).config_get("databases")
        return int(answer.get("databases") or 16)
    except (redis.RedisError, OSError, ValueError):
        return 16


def up() -> list[str]:
    """Start what is not running; return the names of the servers this call started."""
    return [type(server).__name__ for server in managed() if server.up()]


def down(names: list[str] | None = None) -> None:
    for server in managed():
        if names is None or type(server).__name__ in names:
            server.down()


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "status"
    if command == "up":
        started = up()
        print("started: " + (", ".join(started) or "nothing (already running)"))
    elif command == "down":
        down()
    elif command == "status":
        for server in managed():
            print(f"{type(server).__name__}: {'up' if server.running() else 'down'} {server.url}")
    else:
        print("usage: python -m apps.lab.devservers up|down|status", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
