"""The API at the framework's rate: the authenticated cluster list and detail, many users at once.

    .venv/bin/python bench/api [--users 200] [--clusters 2] [--connections 8,32] [--duration 20]
                               [--kinds list,detail] [--in-process 400]

Needs no lab. It brings up a portal of its own: a database (platter_bench_api) holding
--users users, each with a personal token and --clusters running demo clusters (a master and 2
workers, each placed with a disk and an address on synthetic nodes, with their state events),
Redis database 12 (PLATTER_BENCH_REDIS_DB) for the throttles, and the web server as
`./platter run` starts it (apps.lab.devservers.web_command, whatever server that is) with the
production settings (portal.settings.prod: DEBUG off, JSON logs) and the production throttles
(300/min per token, 600/min per user): no rate is raised, so each request pays for its checks.

wrk (Debian's `wrk`) drives it: every request takes the next user's token, round robin, so no
token passes its own budget at these rates and no answer is a 429 (the run says so if one is).
For each kind (`list`: GET /api/v1/clusters; `detail`: GET /api/v1/clusters/<id> of one of the
user's clusters) and each number of open connections it prints requests/s, latency
percentiles, the answers that were not 2xx, and the CPU each request cost (user+system time
over the run, divided by the requests) in the web server's processes, in the PostgreSQL
backends serving the bench's database and in wrk itself; their sum says how many requests/s
the machine's cores could serve at most (the ceiling), whatever else runs on them.

Before the server runs, --in-process N requests of each kind go through the same ASGI
application in one process of production settings, no server or wrk around it: the queries a
request makes and its CPU in that process, a figure that moves much less with the machine's
other work than the server's. Aim (issue 34): >= 300 requests/s with p99 < 50 ms on 2 cores.
"""

import argparse
import asyncio
import json
import os
import re
import resource
import runpy
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import django
import httpx
from django.conf import settings

from bench.bench_db import database_url, recreate_database
from bench.plotting import out_dir

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "platter_bench_api"
BENCH_REDIS_DB = os.environ.get("PLATTER_BENCH_REDIS_DB", "12")
AIM_RATE, AIM_P99_MS = 300, 50
NODES, DISKS_PER_NODE, CORES_PER_NODE = 40, 48, 96


def build_pool() -> None:
    """Synthetic nodes (never contacted: nothing here talks to Docker) and one network."""
    from apps.inventory.models import Disk, Network, Node

    Network.objects.create(
        name="bench",
        subnet="10.99.0.0/16",
        gateway="10.99.0.1",
        first_address="10.99.0.10",
        last_address="10.99.250.250",
    )
    for n in range(NODES):
        node = Node.objects.create(
            name=f"api-{n}",
            endpoint="unix:///nonexistent.sock",
            cores=CORES_PER_NODE,
            memory_mb=CORES_PER_NODE * 8192,
            images=[settings.LAB_IMAGE],  # the demo's, so its launches are accepted
        )
        Disk.objects.bulk_create(
            Disk(node=node, mount_path=f"/data/hdd{d}", kind="hdd", capacity_bytes=10**12)
            for d in range(DISKS_PER_NODE)
        )


def build_users(users: int, clusters: int) -> list[tuple[str, list[int]]]:
    """Users with a token and `clusters` running demo clusters each: (token, cluster ids)."""
    from django.contrib.auth import get_user_model

    from apps.catalog.models import ProductVersion
    from apps.clusters.models import Cluster, ClusterEvent
    from apps.clusters.reservation import Reservation, reserve
    from apps.clusters.services import launch
    from apps.tokens.services import issue_token

    demo = ProductVersion.objects.get(product__name="demo", version="1.0")
    made = []
    for n in range(users):
        user = get_user_model().objects.create_user(f"api-{n}")
        ids = []
        for c in range(clusters):
            cluster = launch(user, demo, f"c{c}", {"size": 2, "disks": 1})
            if not isinstance(reserve(cluster.id), Reservation):
                raise SystemExit(f"the bench's pool could not place {cluster}")
            Cluster.objects.filter(id=cluster.id).update(state="running")
            ClusterEvent.objects.bulk_create(
                ClusterEvent(cluster=cluster, message=state) for state in ("configuring", "running")
            )
            ids.append(cluster.id)
        made.append((issue_token(user, "bench-api").secret, ids))
    return made


def wrk_script(made: list[tuple[str, list[int]]], kind: str) -> str:
    """Lua for wrk: the next user's token (and one of their clusters) on every request."""
    rows = []
    for n, (token, ids) in enumerate(made):
        rows.append(f'{{"{token}", "{path_of(kind, n, ids)}"}}')
    return (
        "local users = {" + ",\n".join(rows) + "}\n"
        "local n = math.random(#users)\n"
        "request = function()\n"
        "  n = n % #users + 1\n"
        "  return wrk.format('GET', users[n][2], {['Authorization'] = 'Bearer ' .. users[n][1],"
        " ['Host'] = '127.0.0.1'})\n"
        "end\n"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env() -> dict[str, str]:
    """The production settings, pointed at the bench's database and Redis database."""
    redis = settings.REDIS_URL.rsplit("/", 1)[0] + "/" + BENCH_REDIS_DB
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.prod",
        "SECRET_KEY": secrets.token_urlsafe(48),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback: no TLS proxy in front here
        "DATABASE_URL": database_url(BENCH_DB),
        "REDIS_URL": redis,
        "DEBUG": "0",
    }


def start_server(port: int, log_path: Path) -> subprocess.Popen:
    from apps.lab.devservers import web_command

    argv = web_command(f"127.0.0.1:{port}")
    log = open(log_path, "w")  # noqa: SIM115 (the server writes to it until stopped)
    server = subprocess.Popen(
        argv, cwd=ROOT, env=server_env(), stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 120
    while True:
        try:  # every worker has booted once the health check answers fast
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code < 500:
                return server
        except httpx.HTTPError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the web server did not start; see {log_path}") from None
            time.sleep(0.3)


def cpu_seconds(root_pid: int) -> float:
    """User+system CPU of a process and its children (the server's workers), in seconds, with
    that of its children that ended (gunicorn replaces a worker after max_requests)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if root_pid in (pid, ppid):
            total += (int(fields[11]) + int(fields[12])) / ticks
        if pid == root_pid:  # its ended children's, once it has waited for them
            total += (int(fields[13]) + int(fields[14])) / ticks
    return total


def database_cpu_seconds(dbname: str) -> dict[int, float]:
    """User+system CPU of each PostgreSQL backend connected to `dbname` now, in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for folder in Path("/proc").glob("[0-9]*"):
        try:
            title = (folder / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if not title.startswith("postgres: ") or f" {dbname} " not in title:
                continue
            fields = (folder / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(folder.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def database_cpu_between(before: dict[int, float], after: dict[int, float]) -> float | None:
    """The backends' CPU over a run; None when no backend lived through it: the server opened
    a connection per request, and each backend's CPU left with it (not counted here)."""
    if not set(before) & set(after):
        return None
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def children_cpu_seconds() -> float:
    """User+system CPU of this process's finished children (each wrk run), in seconds."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def parse_wrk(output: str) -> dict[str, Any]:
    """requests/s, p50/p90/p99 in ms, requests and non-2xx answers from wrk --latency."""

    def ms(label: str) -> float:
        found = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.M)
        return float(found[1]) * UNITS[found[2]] if found else float("nan")

    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    total = re.search(r"(\d+) requests in", output)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    return {
        "rate": float(rate[1]) if rate else 0.0,
        "p50": ms("50"),
        "p90": ms("90"),
        "p99": ms("99"),
        "requests": int(total[1]) if total else 0,
        "non_2xx": int(bad[1]) if bad else 0,
        "socket_errors": errors[1] if errors else "",
    }


def drive(url: str, script: Path, connections: int, seconds: int, pid: int) -> dict:
    before = cpu_seconds(pid), database_cpu_seconds(BENCH_DB), children_cpu_seconds()
    done = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "--timeout",
            "5s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = parse_wrk(done.stdout)
    after = cpu_seconds(pid), database_cpu_seconds(BENCH_DB), children_cpu_seconds()
    spent = {
        "cpu_ms": after[0] - before[0],
        "db_ms": database_cpu_between(before[1], after[1]),
        "wrk_ms": after[2] - before[2],
    }
    for name, cpu in spent.items():  # not `seconds`: the run's length, an int
        per_request = 1000 * cpu / result["requests"] if cpu is not None else None
        result[name] = per_request if result["requests"] else None
    return result


def ceiling(row: dict, cores: int) -> float | None:
    """The requests/s the cores could serve at most, at this row's CPU per request."""
    parts = [row["cpu_ms"], row["db_ms"], row["wrk_ms"]]
    if None in parts or not sum(parts):
        return None
    return cores * 1000 / sum(parts)


def shown(value: float | None, width: int, digits: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def path_of(kind: str, n: int, ids: list[int]) -> str:
    return "/api/v1/clusters" if kind == "list" else f"/api/v1/clusters/{ids[n % len(ids)]}"


def in_process(made_path: Path, kinds: list[str], requests: int) -> None:
    """The child's part of --in-process: set up as the web server is (its gunicorn config's
    environment, the production settings), then per kind a line of JSON: the queries of one
    request (the sync handler, the token already checked once) and the CPU per request through
    the ASGI application, each user's token once first."""
    runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from portal.asgi import application
    from portal.asgi_probe import asgi_get

    made = json.loads(made_path.read_text())
    client = Client(HTTP_HOST="127.0.0.1")
    for kind in kinds:
        token, ids = made[0]
        headers = {"Authorization": f"Bearer {token}"}
        client.get(path_of(kind, 0, ids), headers=headers)
        with CaptureQueriesContext(connection) as captured:
            client.get(path_of(kind, 0, ids), headers=headers)

        async def run(kind: str, first: int, count: int) -> None:
            for n in range(first, first + count):
                token, ids = made[n % len(made)]
                status, _, body = await asgi_get(
                    application,
                    path_of(kind, n, ids),
                    {"Authorization": f"Bearer {token}"},
                    "127.0.0.1",
                )
                if status != 200:
                    raise SystemExit(f"in process: {status} {body[:300]!r}")

        asyncio.run(run(kind, 0, len(made)))
        started = time.process_time()
        asyncio.run(run(kind, len(made), requests))
        cpu_ms = 1000 * (time.process_time() - started) / requests
        print(json.dumps({"kind": kind, "queries": len(captured), "cpu_ms": cpu_ms}), flush=True)


def measure_in_process(made: list, kinds: list[str], requests: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        made_path = Path(folder) / "made.json"
        made_path.write_text(json.dumps(made))
        done = subprocess.run(
            [
                *(sys.executable, "-m", "bench.api", "--in-process-child", str(made_path)),
                *("--kinds", ",".join(kinds), "--in-process", str(requests)),
            ],
            cwd=ROOT,
            env={**server_env(), "LOG_LEVEL": "ERROR"},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"the in-process measure failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def check_answers(url: str, made: list[tuple[str, list[int]]]) -> None:
    """One list and one detail answered 200 with the user's clusters, before timing anything."""
    token, ids = made[0]
    headers = {"Authorization": f"Bearer {token}"}
    listed = httpx.get(f"{url}/api/v1/clusters", headers=headers, timeout=60)
    detail = httpx.get(f"{url}/api/v1/clusters/{ids[0]}", headers=headers, timeout=60)
    if listed.status_code != 200 or detail.status_code != 200:
        raise SystemExit(f"the server answered {listed.status_code}, {detail.status_code}")
    if sorted(c["id"] for c in listed.json()["results"]) != sorted(ids):
        raise SystemExit(f"the list shows other clusters than the user's: {listed.text[:300]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=2, help="per user")
    parser.add_argument("--connections", default="8,32")
    parser.add_argument("--duration", type=int, default=20, help="seconds per row")
    parser.add_argument("--kinds", default="list,detail")
    parser.add_argument(
        "--in-process", type=int, default=400, help="requests per kind in one process (0: none)"
    )
    parser.add_argument("--in-process-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_process_child:
        in_process(args.in_process_child, args.kinds.split(","), args.in_process)
        return
    if not shutil.which("wrk"):
        raise SystemExit("the bench drives the server with wrk: apt-get install wrk")

    admin_db = settings.DATABASES["default"]["NAME"]
    settings.DISPATCH_CLUSTER_TASKS = False  # the clusters are rows only: no worker, no lab
    recreate_database(admin_db, BENCH_DB)
    settings.DATABASES["default"]["NAME"] = BENCH_DB
    django.setup()
    out = out_dir()
    server = None
    try:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        call_command("load_catalog", verbosity=0)
        build_pool()
        made = build_users(args.users, args.clusters)
        from django.db import connections

        connections.close_all()
        kinds = args.kinds.split(",")
        alone = measure_in_process(made, kinds, args.in_process) if args.in_process else []
        port = free_port()
        server = start_server(port, out / "api-web.log")
        url = f"http://127.0.0.1:{port}"
        check_answers(url, made)
        report(args, url, made, server.pid, alone)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        from django.db import connections

        connections.close_all()
        recreate_database(admin_db, BENCH_DB, drop_only=True)


def report(args, url: str, made: list, pid: int, alone: list[dict]) -> None:
    from apps.lab.devservers import web_command

    cores = os.cpu_count() or 1
    server = " ".join(Path(part).name for part in web_command("ADDRESS")[1:])
    print(f"# {cores} cores; server: {server}; {len(made)} users, one token each,")
    print(f"# {args.clusters} running clusters of 3 instances each; production throttles")
    print(f"# load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for row in alone:
        print(
            f"# in one process: {row['kind']} {row['queries']}"
            f" {'query' if row['queries'] == 1 else 'queries'},"
            f" {row['cpu_ms']:.2f} ms CPU per request ({args.in_process} requests)"
        )
    header = (
        f"{'kind':<7} {'conns':>5} {'req/s':>7} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7}"
        f" {'non-2xx':>7} {'server':>7} {'db':>5} {'wrk':>5} {'ceiling':>7} {'met':>4}"
    )
    print("#" + " " * (len(header) - 36) + "CPU ms per request   req/s")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.kinds.split(","):
            script = Path(folder) / f"{kind}.lua"
            script.write_text(wrk_script(made, kind))
            drive(url, script, 8, 2, pid)  # warm-up: every worker's connections and caches
            for connections in [int(c) for c in args.connections.split(",")]:
                r = drive(url, script, connections, args.duration, pid)
                met = r["rate"] >= AIM_RATE and r["p99"] < AIM_P99_MS and not r["non_2xx"]
                print(
                    f"{kind:<7} {connections:>5} {r['rate']:>7.1f} {r['p50']:>7.1f}"
                    f" {r['p90']:>7.1f} {r['p99']:>7.1f} {r['non_2xx']:>7}"
                    f" {shown(r['cpu_ms'], 7, 2)} {shown(r['db_ms'], 5, 2)}"
                    f" {shown(r['wrk_ms'], 5, 2)} {shown(ceiling(r, cores), 7, 0)}"
                    f" {'yes' if met else 'no':>4}",
                    flush=True,
                )
                if r["socket_errors"]:
                    print(f"#   socket errors: {r['socket_errors']}")
    print(f"# load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "# server, db, wrk: CPU per request of the web server's processes, of the database's"
        " backends (-: a connection per request,\n# whose backend's CPU left with it) and of"
        " wrk; ceiling: the requests/s the cores could serve at that CPU per request"
    )


if __name__ == "__main__":
    main()
