"""A noisy tenant does not take the portal from another user (issue 41, item 4): alice queues
many jobs, holds many slow downloads and many log follows open and keeps asking for her job's
outputs, while bob's requests are timed; the same requests of bob's are timed with no noise
first, in the same run.

    .venv/bin/python bench/noisy_tenant.py [--jobs 40] [--downloads 30] [--streams 30]
                                          [--listers 12] [--samples 100] [--node-seconds 1]

Needs no lab. It brings up a stack of its own and takes it down again: a database
(platter_noisy_tenant, bench/bench_db.py), Redis database 13 (PLATTER_BENCH_REDIS_DB), site
label `bench-noisy`, a Spark version as a row, and the web server as `./platter run` starts
it (gunicorn with uvicorn workers, deploy/gunicorn.conf.py, development settings, DEBUG off) serving
`bench.noisy_tenant:served()`: the portal with the node boundary replaced by SlowNode (below), so a
node is as slow as a busy one without a container. No Celery worker: a job admitted stays
admitted (bob's are ended by the bench after each submit, so each finds a free slot).

bob's requests, one after another, --samples each: his cluster list (the page, signed in, and
GET /api/v1/clusters with a token), GET /api/v1/quota, a job submit (POST, admitted at once, its
answer says so), and his job's outputs (a node call taking --node-seconds). Then alice makes
her noise and keeps it up while bob's requests are timed again: --jobs job submits (queued
behind her fair share, JOBS_PER_USER_RUNNING), --downloads downloads of a large output file
read a few bytes at a time (each holds one of her node-call slots), --streams log follows
(stream slots) and --listers loops asking for her outputs (node calls, each taking
--node-seconds). Her requests over her limits are refused (429): the run counts them.

Prints p50/p95 per request and phase, the noisy/quiet ratio of p95, and alice's answers by
kind; writes bench/out/noisy_tenant.png. Exits 1 when a ratio is over AIM or bob got an
answer that was not the one he asked for.
"""

import argparse
import asyncio
import math
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # gunicorn imports bench.noisy_tenant from the checkout
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")

import django  # noqa: E402
import httpx  # noqa: E402

DB = "platter_noisy_tenant"
REDIS_DB = os.environ.get("PLATTER_BENCH_REDIS_DB", "13")
SITE = "bench-noisy"
AIM = 2.0  # bob's p95 with the noise, over his p95 without it
FILE_BYTES = 256 * 1024 * 1024  # alice's output file: far more than her readers take
READ_PAUSE_S = 1.0  # a slow reader takes what one read of its socket gives, once a second
KINDS = ("page", "list", "quota", "submit", "outputs")
LABELS = {
    "page": "bob's cluster list page",
    "list": "bob's API cluster list",
    "quota": "bob's GET /api/v1/quota",
    "submit": "bob's job submit",
    "outputs": "bob's job outputs",
}


# ------------------------------------------------------------------ the server's side


@dataclass
class SlowNode:
    """The node boundary in the bench's server: every container runs; a command (an outputs
    listing) takes NOISY_NODE_SECONDS as on a busy node; a file is FILE_BYTES made as it is
    read; a followed log gets a line a second."""

    name: str
    seconds: float = field(default_factory=lambda: float(os.environ["NOISY_NODE_SECONDS"]))

    def container_state(self, name: str) -> str:
        return "running"

    def exec(self, container: str, argv: list[str], timeout: float) -> tuple[int, str]:
        time.sleep(self.seconds)
        return 0, "8\tcounts.txt\n"

    def open_file(self, container: str, path: str, limit: int):
        from apps.nodes.client import CHUNK, FileRead

        def chunks(size: int) -> Iterator[bytes]:
            for start in range(0, size, CHUNK):
                yield b"x" * min(CHUNK, size - start)

        return FileRead(FILE_BYTES, chunks(min(FILE_BYTES, limit)))

    def logs(self, container: str, tail: int, **options) -> str:
        return "tick\n"

    def follow_logs_async(self, container: str, tail: int, seconds: float, **options):
        return _ticks(seconds)


async def _ticks(seconds: float) -> AsyncIterator[str]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield "tick\n"
        await asyncio.sleep(1)


def served():
    """The ASGI application the bench's gunicorn serves (`bench.noisy_tenant:served()`)."""
    from apps.lab.devservers import web_application
    from apps.nodes.client import installed

    application = web_application()  # sets Django up
    _installed.append(installed(lambda node: SlowNode(node.name)))  # kept: for the process's life
    _installed[0].__enter__()
    return application


_installed: list = []


# ------------------------------------------------------------------ the stack


def isolate() -> str:
    """Point this process and the server at the bench's database and Redis database; returns
    the name of the database to make it from."""
    os.environ.update(
        PLATTER_SITE=SITE,
        DEBUG="0",
        PLATTER_API_RATE_USER="60000/min",
        PLATTER_API_RATE_TOKEN="60000/min",  # noqa: S106 (a rate, not a secret)
    )
    from django.conf import settings

    from bench.bench_db import database_url

    admin_db = settings.DATABASES["default"]["NAME"]
    redis = settings.REDIS_URL.rsplit("/", 1)[0] + "/" + REDIS_DB
    os.environ.update(REDIS_URL=redis, DATABASE_URL=database_url(DB))
    settings.DATABASES["default"]["NAME"] = DB
    settings.CACHES["default"]["LOCATION"] = redis
    return admin_db


@dataclass
class Stack:
    url: str = ""
    tokens: dict = field(default_factory=dict)
    sessions: dict = field(default_factory=dict)
    clusters: dict = field(default_factory=dict)
    jobs: dict = field(default_factory=dict)
    users: dict = field(default_factory=dict)


def prepare(stack: Stack) -> None:
    """Schema, a Spark version, a node, and for alice and bob: a running Spark cluster with its
    master on the node, a finished job with an output path, a token and a session."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.catalog.models import Product, ProductVersion
    from apps.clusters.models import Cluster, Instance
    from apps.inventory.models import Node
    from apps.jobs.models import Job
    from apps.metrics import store
    from apps.tokens.services import issue_token

    call_command("migrate", verbosity=0)
    # A Spark version as a row (jobs need only its plugin): no image, no catalog file.
    spark, _ = Product.objects.get_or_create(name="spark", defaults={"title": "Spark"})
    version = ProductVersion.objects.create(
        product=spark, version="bench", image="bench/spark", plugin="spark"
    )
    node = Node.objects.create(
        name="bench-noisy-1", endpoint="unix:///nowhere", cores=64, memory_mb=256 * 1024
    )
    for name in ("alice", "bob"):
        user = get_user_model().objects.create_user(f"noisy-{name}")
        cluster = Cluster.objects.create(owner=user, version=version, name=name, state="running")
        Instance.objects.create(
            cluster=cluster,
            role="master",
            index=0,
            hostname="master-0",
            cores=1,
            memory_mb=1024,
            disks=0,
            node=node,
            container_id="c-master",
            active=True,
            state="running",
        )
        job = Job.objects.create(
            cluster=cluster,
            owner=user,
            kind="pyspark",
            main="/opt/app.py",
            output_path="out",
            state=Job.State.SUCCEEDED,
        )
        stack.users[name], stack.clusters[name], stack.jobs[name] = user.id, cluster.id, job.id
        stack.tokens[name] = issue_token(user, "bench-noisy").secret
        stack.sessions[name] = session_for(user)
    store.client().flushdb()  # the bench's own Redis database: no slot of an earlier run


def session_for(user) -> str:
    """A signed-in session of the user's, as the sign-in page would make it."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return session.session_key or ""


def start_server(port: int, node_seconds: float, out: Path):
    from apps.lab.devservers import web_command
    from bench.load import start

    os.environ.update(
        NOISY_NODE_SECONDS=str(node_seconds),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench")]),
    )
    command = web_command(f"127.0.0.1:{port}")
    command[-1] = "bench.noisy_tenant:served()"
    server = start(command, out / "noisy-tenant-web.log")
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return server
        except httpx.HTTPError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"the server did not start; see {out}/noisy-tenant-web.log"
                ) from None
            time.sleep(0.3)


def end_bobs_jobs(user_id: int) -> None:
    """No worker runs bob's admitted job: end it, so his next submit finds his slot free."""
    from apps.jobs.models import Job

    Job.objects.filter(owner_id=user_id, state=Job.State.QUEUED).update(state=Job.State.SUCCEEDED)


# ------------------------------------------------------------------ the measurement


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)
    wrong: int = 0  # answers that were not what bob asked for


async def bob_requests(stack: Stack, samples: int) -> dict[str, Timing]:
    """bob's requests, one after another, on a loop and thread of their own (alice's readers
    keep the bench's own loop busy, which must not count as the portal's latency)."""
    from asgiref.sync import sync_to_async

    cluster, job = stack.clusters["bob"], stack.jobs["bob"]
    asks = {
        "page": ("web", "GET", "/clusters/", 200),
        "list": ("api", "GET", "/api/v1/clusters", 200),
        "quota": ("api", "GET", "/api/v1/quota", 200),
        "submit": ("api", "POST", f"/api/v1/clusters/{cluster}/jobs", 202),
        "outputs": ("api", "GET", f"/api/v1/jobs/{job}/outputs", 200),
    }
    submit = {"kind": "pyspark", "main": "/opt/app.py"}
    end_jobs = sync_to_async(end_bobs_jobs, thread_sensitive=False)

    async def run() -> dict[str, Timing]:
        timeout = httpx.Timeout(60)
        headers = {"Authorization": f"Bearer {stack.tokens['bob']}"}
        cookies = {"sessionid": stack.sessions["bob"]}
        async with (
            httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=timeout) as api,
            httpx.AsyncClient(base_url=stack.url, cookies=cookies, timeout=timeout) as web,
        ):
            clients = {"api": api, "web": web}
            found = {kind: Timing() for kind in asks}
            for _ in range(samples):
                for kind, (client, method, path, expected) in asks.items():
                    body = submit if method == "POST" else None
                    begun = time.perf_counter()
                    try:
                        answer = await clients[client].request(method, path, json=body)
                        admitted = kind != "submit" or admitted_at_once(answer)
                        if answer.status_code != expected or not admitted:
                            found[kind].wrong += 1
                            print(f"# bob {kind}: {answer.status_code} {answer.text[:200]}")
                    except httpx.HTTPError as error:
                        found[kind].wrong += 1
                        print(f"# bob {kind}: {error!r}")
                    found[kind].seconds.append(time.perf_counter() - begun)
                    if kind == "submit":
                        await end_jobs(stack.users["bob"])
            return found

    return await asyncio.to_thread(asyncio.run, run())


def admitted_at_once(answer: httpx.Response) -> bool:
    """A submit's answer: its job holds a slot (no reason says it waits)."""
    return answer.status_code == 202 and not answer.json().get("reason")


@dataclass
class Noise:
    answers: Counter = field(default_factory=Counter)  # (kind, status)
    received: Counter = field(default_factory=Counter)  # bytes her streams got, by kind
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def hold(client: httpx.AsyncClient, kind: str, path: str, noise: Noise) -> None:
    """One of alice's streams: open it and read it slowly until told to stop."""
    try:
        async with client.stream("GET", path) as response:
            noise.answers[kind, response.status_code] += 1
            async for chunk in response.aiter_raw():  # as the socket gives it, once a second
                noise.received[kind] += len(chunk)
                if noise.stop.is_set():
                    return
                await asyncio.sleep(READ_PAUSE_S)
    except httpx.HTTPError:
        noise.answers[kind, 0] += 1


async def keep_asking(client: httpx.AsyncClient, kind: str, method: str, path: str, noise: Noise):
    """One of alice's loops asking again as soon as answered (429s too), until told to stop."""
    body = {"kind": "pyspark", "main": "/opt/app.py"} if method == "POST" else None
    while not noise.stop.is_set():
        try:
            answer = await client.request(method, path, json=body)
            noise.answers[kind, answer.status_code] += 1
            if answer.status_code == 429:
                await asyncio.sleep(0.2)  # a client that backs off a little, as told
        except httpx.HTTPError:
            noise.answers[kind, 0] += 1


async def opened(noise: Noise, kind: str, count: int) -> None:
    """Until `count` of alice's streams of that kind have their answer (a minute at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(n for (k, _), n in noise.answers.items() if k == kind) >= count:
            return
        await asyncio.sleep(0.2)


async def measure(stack: Stack, args: argparse.Namespace) -> dict:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    alice = httpx.AsyncClient(
        base_url=stack.url,
        headers={"Authorization": f"Bearer {stack.tokens['alice']}"},
        limits=limits,
        timeout=httpx.Timeout(60, read=None),
    )
    cluster, job = stack.clusters["alice"], stack.jobs["alice"]
    results: dict = {}
    noise = Noise()
    try:
        await bob_requests(stack, 10)  # warm every worker's imports and caches
        results["quiet"] = await bob_requests(stack, args.samples)
        for _ in range(args.jobs):  # her queue: all but her fair share wait
            answer = await alice.post(
                f"/api/v1/clusters/{cluster}/jobs", json={"kind": "pyspark", "main": "/opt/a.py"}
            )
            queued = answer.status_code == 202 and not admitted_at_once(answer)
            admitted = "admitted" if admitted_at_once(answer) else answer.status_code
            noise.answers["job submit", "queued" if queued else admitted] += 1
        download = f"/api/v1/jobs/{job}/outputs/counts.txt"
        follow = f"/api/v1/clusters/{cluster}/logs?follow=true&seconds=300&tail=5"
        # Her follows first: each asks the node once as it opens (a node call), which her
        # downloads, holding her node-call slots to their end, would otherwise refuse.
        running = [
            asyncio.ensure_future(hold(alice, "log follow", follow, noise))
            for _ in range(args.streams)
        ]
        await opened(noise, "log follow", args.streams)
        running += [
            *(
                asyncio.ensure_future(hold(alice, "download", download, noise))
                for _ in range(args.downloads)
            ),
            *(
                asyncio.ensure_future(
                    keep_asking(alice, "outputs", "GET", f"/api/v1/jobs/{job}/outputs", noise)
                )
                for _ in range(args.listers)
            ),
        ]
        await opened(noise, "download", args.downloads)
        results["noisy"] = await bob_requests(stack, args.samples)
        noise.stop.set()
        await asyncio.wait(running, timeout=30)
        for task in running:
            task.cancel()
    finally:
        await alice.aclose()
    results["noise"] = noise
    return results


# ------------------------------------------------------------------ report


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def table(quiet: dict[str, Timing], noisy: dict[str, Timing]) -> tuple[str, bool]:
    """bob's p50/p95 in each phase and the ratio of p95s; whether every ratio is within AIM
    and every answer was the one asked for."""
    lines = [
        f"{'request':<26}{'quiet p50':>10}{'p95':>8}{'noisy p50':>11}{'p95':>8}"
        f"{'p95 ratio':>11}{'wrong':>7}"
    ]
    good = True
    for kind in KINDS:
        a, b = quiet[kind], noisy[kind]
        q50, q95, n50, n95 = (
            percentile(t.seconds, p) * 1000 for t, p in ((a, 50), (a, 95), (b, 50), (b, 95))
        )
        ratio = n95 / q95 if q95 else math.nan
        good &= ratio <= AIM and a.wrong + b.wrong == 0
        lines.append(
            f"{LABELS[kind]:<26}{q50:>10.1f}{q95:>8.1f}{n50:>11.1f}{n95:>8.1f}"
            f"{ratio:>10.2f}x{a.wrong + b.wrong:>7}"
        )
    lines.append(f"(ms; aim: every p95 ratio <= {AIM}: {'met' if good else 'NOT met'})")
    return "\n".join(lines), good


def noise_table(noise: Noise) -> str:
    kinds = sorted({kind for kind, _ in noise.answers})
    lines = [f"{'alice (noisy)':<16}answers by status (429: refused over her limit)"]
    for kind in kinds:
        counts = {s: n for (k, s), n in sorted(noise.answers.items(), key=str) if k == kind}
        shown = ", ".join(f"{s}: {n}" for s, n in counts.items())
        lines.append(f"{kind:<16}{shown}")
    lines.append(f"bytes her streams received: {dict(noise.received)}")
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    from bench import plotting

    plt = plotting.pyplot()
    figure, axes = plt.subplots(1, len(KINDS), figsize=(3 * len(KINDS), 4))
    for axis, kind in zip(axes, KINDS, strict=True):
        data = [[s * 1000 for s in results[phase][kind].seconds] for phase in ("quiet", "noisy")]
        axis.boxplot(data, whis=(5, 95), showfliers=False)
        axis.set_xticks([1, 2], ["quiet", "noisy"])
        axis.set_title(LABELS[kind], fontsize=9)
        axis.set_ylabel("ms")
    figure.suptitle("bob's requests without and with a noisy tenant (whiskers p5-p95)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def run(args: argparse.Namespace) -> bool:
    """The whole bench; True when the aim is met."""
    from bench.bench_db import recreate_database
    from bench.load import free_port, stop

    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    admin_db = isolate()
    recreate_database(admin_db, DB)
    django.setup()
    stack = Stack()
    server = None
    try:
        prepare(stack)
        port = free_port()
        server = start_server(port, args.node_seconds, out)
        stack.url = f"http://127.0.0.1:{port}"
        results = asyncio.run(measure(stack, args))
    finally:
        if server is not None:
            stop(server)
        from django.db import connections

        connections.close_all()
        recreate_database(admin_db, DB, drop_only=True)
    from django.conf import settings

    workers = os.environ.get("GUNICORN_WORKERS", "the config's default")
    print(
        f"# own stack: gunicorn with uvicorn workers ({workers}), database {DB}, Redis database "
        f"{REDIS_DB}; alice's limits: {settings.NODE_CALLS_PER_USER} node calls, "
        f"{settings.STREAMS_PER_USER} streams, {settings.JOBS_PER_USER_RUNNING} running jobs"
    )
    print(
        f"# {args.samples} of each of bob's requests per phase, one after another; noise: "
        f"{args.jobs} job submits, {args.downloads} slow downloads, {args.streams} log follows, "
        f"{args.listers} outputs loops; a node call takes {args.node_seconds} s"
    )
    text, good = table(results["quiet"], results["noisy"])
    print(text)
    print(noise_table(results["noise"]))
    if args.plot:
        plot(results, out / "noisy_tenant.png")
        print(f"# plot: {out / 'noisy_tenant.png'}")
    return good


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--downloads", type=int, default=30)
    parser.add_argument("--streams", type=int, default=30)
    parser.add_argument("--listers", type=int, default=12)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--node-seconds", type=float, default=1.0)
    parser.add_argument("--no-plot", dest="plot", action="store_false")
    args = parser.parse_args()
    if args.plot:
        from bench import plotting

        plotting.require()
    raise SystemExit(0 if run(args) else 1)


if __name__ == "__main__":
    main()
