"""The private servers really start, are reused when running, and stop cleanly."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from apps.lab import devservers


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


@pytest.mark.skipif(os.geteuid() != 0, reason="the fallback exists for root's private folders")
def test_two_state_folders_in_a_private_checkout_run_two_databases_side_by_side():
    """A checkout in a 0700 folder (a clone under /root, `mktemp -d`): the 'postgres' user cannot
    enter it, so each state folder's cluster moves under /var/lib/platter, one per state folder,
    and the test run's database and a scratch portal's (the fault suite) run at once."""
    private = Path(tempfile.mkdtemp(prefix="platter-private-"))
    private.chmod(0o700)
    main_state, scratch_state = private / "checkout" / ".local", private / "scratch" / ".local"
    homes = [devservers._postgres_home(main_state), devservers._postgres_home(scratch_state)]
    assert all(str(home).startswith("/var/lib/platter/") for home in homes), homes
    assert homes[0] != homes[1], "each state folder needs a data directory of its own"
    servers = [devservers.Postgres(data_dir=home / "data", port=free_port()) for home in homes]
    try:
        for server in servers:
            assert server.up() is True, f"{server.data_dir} should start fresh"
        assert all(server.running() for server in servers)
    finally:
        for server in servers:
            server.down()
        for home in homes:
            shutil.rmtree(home.parent, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)


def test_given_urls_mean_nothing_is_started_here(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://elsewhere/db")
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere/0")
    assert devservers.managed() == []
    monkeypatch.delenv("REDIS_URL")
    assert [type(s).__name__ for s in devservers.managed()] == ["Redis"]


# ---------------------------------------------------------------- ./platter run, end to end


def processes_with(variable: str) -> list[str]:
    """Processes whose environment holds `variable` (NAME=value): everything `./platter` started
    inherits it, daemons that left its process group too."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if variable.encode() in environ.read_bytes().split(b"\0"):
                found.append((environ.parent / "cmdline").read_bytes().replace(b"\0", b" "))
        except OSError:  # gone meanwhile
            continue
    return [command.decode(errors="replace") for command in found]


@pytest.mark.lab
@pytest.mark.timeout(900)
def test_run_serves_with_gunicorn_and_ctrl_c_then_lab_down_leave_nothing(scratch):
    """`./platter run` on a state folder of its own (its own Postgres, Redis, a one-node lab on
    addresses and subnets of its own, web port): gunicorn answers pages and static files;
    Ctrl-C stops web, beat and worker, the lab and the servers it started; `./platter lab
    down` afterwards starts and stops the servers again and leaves nothing either."""
    from django.conf import settings

    from apps.lab.nodes import LabSpec
    from apps.lab.place import lab_key
    from apps.lab.tests.machine import machine_holds

    state = scratch / ".local"
    web, postgres, redis = free_port(), free_port(), free_port()
    slot = settings.LAB_ADDRESS_SLOT
    hidden = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "PLATTER_SITE"}
    env = {key: value for key, value in os.environ.items() if key not in hidden}
    env.update(
        PLATTER_STATE_DIR=str(state),
        PLATTER_POSTGRES_PORT=str(postgres),
        PLATTER_REDIS_PORT=str(redis),
        PLATTER_WEB=f"127.0.0.1:{web}",
        STATIC_ROOT=str(scratch / "static"),
        PLATTER_LAB_ADDRESS_PREFIX=f"127.0.{60 + slot}.",
        PLATTER_LAB_NODES="1",
        PLATTER_LAB_SSH_NODE="0",
        PLATTER_LAB_DISKS="1",
        PLATTER_LAB_SSD_PER_NODE="0",
        PLATTER_LAB_DISK_SIZE_MB="32",
        PLATTER_LAB_PRODUCTS="",
        PLATTER_LAB_SEGMENTS_SUBNET=f"10.{220 + slot}.0.0/16",
        PLATTER_LAB_SEGMENTS_PER_SLOT="1",
    )
    spec = LabSpec(home=state / "lab", key=lab_key(state))
    mark = f"PLATTER_STATE_DIR={state}"
    ports = (web, postgres, redis)
    cli = [sys.executable, "-m", "apps.lab.cli"]
    log = scratch / "run.log"
    # A session of its own, as a terminal's foreground job: Ctrl-C goes to its whole group.
    run = subprocess.Popen(
        [*cli, "run"],
        cwd=devservers.BASE_DIR,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{web}"
        deadline = time.monotonic() + 600
        while "Press Ctrl-C" not in log.read_text():
            assert run.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(1)
        # The first request loads the URLconf and views: seconds on a busy 2-core machine.
        assert httpx.get(f"{url}/healthz", timeout=60).status_code == 200
        script = httpx.get(f"{url}/static/django_htmx/htmx-2.min.js", timeout=10)
        assert script.status_code == 200 and b"htmx" in script.content
        assert any("gunicorn -c" in command for command in processes_with(mark))
        assert not any("runserver" in command for command in processes_with(mark))
        assert machine_holds(spec), "the run's lab is up"

        os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=180) == 0, log.read_text()
    finally:
        if run.poll() is None:  # a failed check: the run still takes down what it started
            os.killpg(run.pid, signal.SIGINT)
            try:
                run.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
    output = log.read_text()
    # In order: the web server, then (beat and) the worker, then the lab.
    assert output.index("Shutting down: Master") < output.index("Warm shutdown")
    assert output.index("Warm shutdown") < output.index("lab-1: stopped")
    assert processes_with(mark) == []
    assert [port for port in ports if devservers.port_open("127.0.0.1", port)] == []
    assert machine_holds(spec) == []

    down = subprocess.run(
        [*cli, "lab", "down"],
        cwd=devservers.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert down.returncode == 0, down.stdout + down.stderr
    assert processes_with(mark) == []
    assert [port for port in ports if devservers.port_open("127.0.0.1", port)] == []
    assert machine_holds(spec) == []


def test_run_starts_a_worker_per_kind_of_work_so_jobs_never_hold_a_launchs_slot():
    """`./platter run` splits the queues as production does (deploy/systemd): every queue
    consumed by exactly one of its workers; users' jobs and the idle probes each alone, never
    beside launches, destroys or beat's housekeeping."""
    from apps.lab.cli import worker_commands
    from portal.queues import ALL_QUEUES, CLUSTERS, IDLE, JOBS, PERIODIC

    def option(argv: list[str], flag: str, default: str = "") -> str:
        return argv[argv.index(flag) + 1] if flag in argv else default

    workers = worker_commands()
    queues = {name: option(argv, "-Q").split(",") for name, argv in workers.items()}
    consumed = [queue for names in queues.values() for queue in names]
    assert sorted(consumed) == sorted(ALL_QUEUES)
    alone = {queue: names for names in queues.values() for queue in names if len(names) == 1}
    assert JOBS in alone and IDLE in alone and PERIODIC in alone
    assert CLUSTERS not in alone  # with nodes and ssh_keys: short node work a user waits for
    names = [option(argv, "-n") for argv in workers.values()]
    assert len(set(names)) == len(names), "each worker a node name of its own"
    processes = 0
    for name, argv in workers.items():
        assert argv[1:6] == ["-m", "celery", "-A", "portal", "worker"]
        pool = option(argv, "-P", "prefork")
        if CLUSTERS in queues[name] or PERIODIC in queues[name]:
            assert pool == "prefork"  # the pool that enforces the tasks' hard time limits
        processes += 1 + (int(option(argv, "-c")) if pool == "prefork" else 0)
    assert processes <= 10, "a development machine's memory: few processes in all"
