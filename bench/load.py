"""Reliability under load: many users launching and destroying demo clusters at once.

    .venv/bin/python bench/load [--duration 60] [--users 8] [--seed 1]
    .venv/bin/python bench/load --url http://127.0.0.1:8000 --token-file tokens.txt

Without --url it brings up a stack of its own on the lab and takes it down again: a database
(platter_load), Redis database 7, lab address slot 7, site label `bench-load`, the lab's
inventory and the catalog, one user with a small quota and a personal token per simulated
user, a Celery worker on every queue of portal.queues.ALL_QUEUES and gunicorn on a free local
port as `./platter run` starts it (apps.lab.devservers.web_command; development settings,
DEBUG off; the API's throttles raised unless PLATTER_API_RATE_* are set). No beat: a release
admits queued clusters by itself (SCHEDULER_ADMIT_ON_RELEASE).
With --url it drives a running portal, one user per token of the file (one a line), and reads
the database DATABASE_URL names (and the nodes, for PLATTER_SITE's containers) for the checks.

The users (bench/load_users.py) launch small demo clusters (a master and 1-2 workers, one disk
each), poll them, sometimes stop and start or extend them, destroy them (keeping the data or
wiping it) and list; quotas and the lab's capacity are small, so some launches queue and some
are refused with a 4xx that names the reason. After --duration seconds nobody launches any
more, everything left is destroyed, and once it settled (at most --settle seconds) the checks
(bench/load_checks.py) read the database and the nodes. Prints throughput, latency percentiles
per kind of call, time to running and every status code; writes bench/out/load.png. Exits 1
when a check failed.
"""

import argparse
import asyncio
import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import django
import httpx
import psycopg

from bench import load_checks, plotting
from bench.load_users import QUEUE_PATIENCE_S, Recorder, drive
from portal.queues import ALL_QUEUES, worker_command

ROOT = Path(__file__).resolve().parent.parent

LOAD_DB = "platter_load"
LOAD_REDIS_DB = "7"
LOAD_ADDRESS_SLOT = "7"
SITE = "bench-load"
# Raised for the bench's own server so the load, not the throttle, is what gets measured.
RAISED_RATES = {"PLATTER_API_RATE_USER": "60000/min", "PLATTER_API_RATE_TOKEN": "60000/min"}
# Per simulated user: two clusters of up to 3 instances fit only if one is small and a third
# never does, so both the cluster and the instance limits get met.
USER_QUOTA = {
    "max_clusters": 2,
    "max_instances": 5,
    "max_cores": 5,
    "max_memory_mb": 1024,
    "max_disks": 5,
}
KINDS = ("launch", "detail", "list", "stop", "start", "extend", "destroy")


@dataclass
class Outcome:
    recorder: Recorder
    checks: list[load_checks.Check]
    users: int

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def run(url: str, tokens: list[str], duration: float, settle: float, seed: int = 1) -> Outcome:
    """The load on the portal at `url`, one user per token, then the checks on the database
    Django is configured with (and the nodes, for this portal's PLATTER_SITE)."""
    from django.conf import settings

    from apps.tokens.models import ApiToken
    from apps.tokens.services import digest_of

    digests = [digest_of(token) for token in tokens]
    owner_ids = list(ApiToken.objects.filter(digest__in=digests).values_list("user_id", flat=True))
    if len(owner_ids) != len(tokens):  # else the checks would look at the wrong database
        raise SystemExit(
            f"{len(tokens) - len(owner_ids)} of the tokens are unknown to database "
            f"{settings.DATABASES['default']['NAME']}: set DATABASE_URL to the portal's database"
        )
    recorder = asyncio.run(drive(url, tokens, duration, settle, seed))
    load_checks.wait_until_settled(owner_ids, seconds=30)
    found = load_checks.consistency_checks(recorder, owner_ids, settings.PLATTER_SITE)
    return Outcome(recorder, found, len(tokens))


# ------------------------------------------------------------------ the bench's own stack


def database_url(dbname: str) -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{dbname}"


def recreate_database(admin_url: str, drop_only: bool = False) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {LOAD_DB} WITH (FORCE)")
        if not drop_only:
            conn.execute(f"CREATE DATABASE {LOAD_DB}")


def isolate() -> str:
    """Point this process and its children at the bench's database, Redis database, address
    slot and site label; returns the URL of the server's admin database."""
    os.environ.update(
        PLATTER_SITE=SITE,
        PLATTER_LAB_ADDRESS_SLOT=LOAD_ADDRESS_SLOT,
        DEBUG="0",
        PLATTER_DISPATCH_CLUSTER_TASKS="1",
    )
    for name, rate in RAISED_RATES.items():
        os.environ.setdefault(name, rate)
    from django.conf import settings

    admin_url = database_url(settings.DATABASES["default"]["NAME"])
    redis = settings.REDIS_URL.rsplit("/", 1)[0] + "/" + LOAD_REDIS_DB
    os.environ.update(REDIS_URL=redis, DATABASE_URL=database_url(LOAD_DB))
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = redis
    settings.DATABASES["default"]["NAME"] = LOAD_DB
    return admin_url


def prepare(users: int) -> list[str]:
    """Schema, the lab's inventory, the catalog, and users with quotas; their tokens."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.accounts.models import Quota
    from apps.lab import lab
    from apps.tokens.services import issue_token

    call_command("migrate", verbosity=0)
    lab.sync_inventory()
    call_command("load_catalog", verbosity=0)
    tokens = []
    for n in range(1, users + 1):
        user = get_user_model().objects.create_user(f"load-{n}")
        Quota.objects.create(user=user, **USER_QUOTA)
        tokens.append(issue_token(user, "bench-load").secret)
    return tokens


def remove_site_leftovers() -> tuple[int, list[str]]:
    """Containers and data folders with the bench's site label on every node (an earlier run
    that crashed, or this run's kept data): (containers removed, nodes that did not answer)."""
    from apps.inventory.models import Disk, Node
    from apps.nodes import engine

    removed, silent = 0, []
    for node in Node.objects.all():
        try:
            found = engine.cached(node).containers.list(
                all=True, filters={"label": f"platter.site={SITE}"}, ignore_removed=True
            )
            for container in found:
                container.remove(force=True)
                removed += 1
        except Exception as error:  # noqa: BLE001 (the next run removes what is left here)
            silent.append(f"{node.name}: {error}")
    for disk in Disk.objects.all():  # lab disks are mounted on this machine
        shutil.rmtree(Path(disk.mount_path) / SITE, ignore_errors=True)
    return removed, silent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(argv: list[str], log_path: Path) -> subprocess.Popen:
    log = open(log_path, "w")  # noqa: SIM115 (the child writes to it until stopped)
    return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def start_worker(out: Path) -> subprocess.Popen:
    from portal.celery import app

    app.control.purge()  # tasks of an earlier, interrupted run
    worker = start(
        worker_command(
            f"load-{os.getpid()}",
            "-P",
            "threads",
            "-c",
            "6",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "info",
        ),
        out / "load-worker.log",
    )
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the bench worker did not start; see {out / 'load-worker.log'}")
    return worker


def start_server(port: int, workers: int, out: Path) -> subprocess.Popen:
    from apps.lab.devservers import web_command

    # The web server exactly as `./platter run` starts it, with the bench's worker count.
    server = start(
        [*web_command(f"127.0.0.1:{port}"), "--workers", str(workers), "--timeout", "60"],
        out / "load-web.log",
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return server
        except httpx.HTTPError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not start; see {out / 'load-web.log'}") from None
            time.sleep(0.3)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def own_stack(
    users: int, web_workers: int, out: Path
) -> Iterator[tuple[str, list[str], list[str]]]:
    """(url, tokens, notes for the report) of a portal brought up for this run only."""
    from apps.lab import lab

    # Before anything is made: the clean-up reads the nodes from the migrated database.
    if not lab.is_up():
        raise SystemExit("the lab is not running: start it with ./platter lab up")
    admin_url = isolate()
    recreate_database(admin_url)
    django.setup()
    processes = []
    try:
        tokens = prepare(users)
        leftovers, silent = remove_site_leftovers()
        processes.append(start_worker(out))
        port = free_port()
        processes.append(start_server(port, web_workers, out))
        rates = ", ".join(
            f"{k}={os.environ[k]}" for k in sorted(os.environ) if k.startswith("PLATTER_API_RATE_")
        )
        notes = [
            f"own stack: gunicorn {web_workers} uvicorn workers on 127.0.0.1:{port}, "
            f"a Celery worker (6 threads) on queues {','.join(ALL_QUEUES)} of "
            f"{os.environ['REDIS_URL']}, "
            f"database {LOAD_DB}, site {SITE}, lab address slot {LOAD_ADDRESS_SLOT}",
            f"throttles: {rates or 'defaults'}; quota per user: {USER_QUOTA}",
        ]
        if leftovers:
            notes.append(f"removed {leftovers} containers an earlier run left behind")
        notes += [f"did not answer before the run: {node}" for node in silent]
        yield f"http://127.0.0.1:{port}", tokens, notes
    finally:
        for process in reversed(processes):
            stop(process)
        for node in remove_site_leftovers()[1]:
            print(f"# clean-up: {node} did not answer; the next run removes what is left there")
        from django.db import connections

        connections.close_all()
        recreate_database(admin_url, drop_only=True)


# ------------------------------------------------------------------ report


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def spread(seconds: list[float]) -> str:
    quantiles = ", ".join(f"p{q} {percentile(seconds, q):.2f} s" for q in (50, 95, 99))
    return f"{quantiles} (n={len(seconds)})"


def latency_rows(recorder: Recorder) -> list[tuple]:
    """(kind, requests, 2xx, 4xx, 5xx, no answer, p50, p95, p99 in ms) per kind and overall."""
    rows = []
    for kind in (*KINDS, None):
        samples = recorder.of(kind)
        if not samples:
            continue
        ms = [s.seconds * 1000 for s in samples]
        classes = Counter(s.status // 100 for s in samples)
        rows.append(
            (
                kind or "all",
                len(samples),
                classes[2],
                classes[4],
                classes[5],
                classes[0],
                *(percentile(ms, q) for q in (50, 95, 99)),
            )
        )
    return rows


def report(outcome: Outcome, notes: list[str], duration: float) -> None:
    recorder = outcome.recorder
    print(f"# {outcome.users} users for {duration:.0f} s, then wind-down; {os.cpu_count()} cores")
    for note in notes:
        print(f"# {note}")
    header = (
        f"{'kind':<8} {'requests':>8} {'2xx':>5} {'4xx':>5} {'5xx':>5} {'none':>5}"
        f" {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
    )
    print(header)
    print("-" * len(header))
    for kind, n, ok, refused, broken, none, p50, p95, p99 in latency_rows(recorder):
        print(
            f"{kind:<8} {n:>8} {ok:>5} {refused:>5} {broken:>5} {none:>5}"
            f" {p50:>8.1f} {p95:>8.1f} {p99:>8.1f}"
        )

    load = [s for s in recorder.samples if s.at <= recorder.load_seconds]
    launches = [s for s in load if s.kind == "launch"]
    accepted = sum(s.status == 202 for s in launches)
    minutes = recorder.load_seconds / 60
    ready = list(recorder.to_running.values())
    print()
    print(
        f"throughput: {len(load) / recorder.load_seconds:.1f} requests/s while launching "
        f"({len(recorder.samples)} requests in all); launches {len(launches) / minutes:.1f}/min "
        f"asked, {accepted / minutes:.1f}/min accepted"
    )
    print(
        f"clusters: {len(recorder.launched)} accepted, {len(ready)} reached running, "
        f"{len(recorder.cancelled)} cancelled after {QUEUE_PATIENCE_S} s queued, "
        f"{len(recorder.failed)} failed"
    )
    for cluster, reason in sorted(recorder.failed.items()):  # an answer too, with its reason
        print(f"    cluster {cluster} failed: {reason}")
    for label, values in (
        ("time to running (created -> running, queueing included)", ready),
        ("placing -> running (containers and configuration)", recorder.placing_to_running.values()),
    ):
        if values:
            print(f"{label}: {spread(list(values))}")
    statuses = Counter(s.status for s in recorder.samples)
    print(
        "status codes: "
        + ", ".join(f"{code or 'no answer'}: {n}" for code, n in sorted(statuses.items()))
    )
    refusals = Counter(s.refusal for s in recorder.samples if s.refusal)
    print("4xx named: " + (", ".join(f"{why}: {n}" for why, n in refusals.most_common()) or "none"))
    print()
    for check in outcome.checks:
        print(f"{'pass' if check.passed else 'FAIL'}  {check.name}")
        for problem in check.problems[:10]:
            print(f"        {problem}")
        if len(check.problems) > 10:
            print(f"        ... and {len(check.problems) - 10} more")


def plot(recorder: Recorder, path: Path) -> None:
    plt = plotting.pyplot()

    rows = [row for row in latency_rows(recorder) if row[0] != "all"]
    fig, (latency, rate) = plt.subplots(1, 2, figsize=(11, 4))
    x = range(len(rows))
    for offset, (q, column) in zip((-0.27, 0, 0.27), ((50, 6), (95, 7), (99, 8)), strict=True):
        latency.bar([i + offset for i in x], [row[column] for row in rows], 0.27, label=f"p{q}")
    latency.set_xticks(list(x), [row[0] for row in rows])
    latency.set_ylabel("latency (ms)")
    latency.set_title("API latency per kind of call")
    latency.legend()

    end = int(max((s.at for s in recorder.samples), default=0)) + 1
    seconds = range(end)
    bins = {label: [0] * end for label in ("2xx/3xx", "4xx", "5xx or no answer")}
    for s in recorder.samples:
        label = (
            "4xx"
            if 400 <= s.status < 500
            else "2xx/3xx"
            if 0 < s.status < 400
            else "5xx or no answer"
        )
        bins[label][int(s.at)] += 1
    bottom = [0] * end
    for label, counts in bins.items():
        rate.bar(seconds, counts, 1.0, bottom=bottom, label=label, align="edge")
        bottom = [a + b for a, b in zip(bottom, counts, strict=True)]
    rate.axvline(recorder.load_seconds, color="k", linestyle="--", label="launches stop")
    rate.set_xlabel("seconds")
    rate.set_ylabel("requests per second")
    rate.set_title("Requests over time")
    rate.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=4, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ------------------------------------------------------------------ entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60, help="seconds of launching")
    parser.add_argument("--users", type=int, default=8, help="simulated users (own stack)")
    parser.add_argument("--settle", type=float, default=120, help="longest wind-down, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn workers (own stack)")
    parser.add_argument("--url", help="drive this running portal instead of an own stack")
    parser.add_argument("--token-file", type=Path, help="with --url: one token per line")
    args = parser.parse_args(argv)
    plotting.require()  # before minutes of measuring, not after them
    if bool(args.url) != bool(args.token_file):
        parser.error("--url and --token-file go together")

    out = plotting.out_dir()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # counted, not logged one by one
    if args.url:
        django.setup()
        from django.conf import settings

        tokens = [t.strip() for t in args.token_file.read_text().splitlines() if t.strip()]
        db = settings.DATABASES["default"]["NAME"]
        notes = [
            f"portal at {args.url}, not started here; checks read database {db}, "
            f"site {settings.PLATTER_SITE}"
        ]
        outcome = run(args.url.rstrip("/"), tokens, args.duration, args.settle, args.seed)
    else:
        with own_stack(args.users, args.web_workers, out) as (url, tokens, notes):
            outcome = run(url, tokens, args.duration, args.settle, args.seed)
    report(outcome, notes, args.duration)
    plot(outcome.recorder, out / "load.png")
    print(f"# plot: {out / 'load.png'}" + ("" if args.url else f"; logs: {out}/load-*.log"))
    sys.exit(0 if outcome.passed else 1)


if __name__ == "__main__":
    main()
