"""Streams do not starve the portal: one user holds many log follows and slow web UI requests
open while another user's pages are timed, against the same pages timed idle in the same run.

    .venv/bin/python bench/streams [--follows 200] [--drips 50] [--samples 200]

It brings up a stack of its own and takes it down again: a database (platter_streams), Redis
database 12, site label `bench-streams`, the lab's inventory and the catalog, and the web
server on a free local port as `./platter run` starts it (apps.lab.devservers.web_command:
gunicorn with uvicorn workers, development settings, DEBUG off). No Celery worker: nothing is
launched. alice's cluster is a real container on a lab node that writes a line a second (her
follows read its log through the node's Engine API) and a "UI" on 127.0.0.1 that sends its
headers and then a byte every 5 s (her drips); bob has a cluster of his own.

Phases: bob's cluster page (/clusters/<id>/, signed in) and API list (/api/v1/clusters,
token) are timed one request after another, --samples of each, first idle, then while alice
holds --follows follows (GET /api/v1/clusters/<id>/logs?follow=true) and --drips UI requests
open. The stream limit is raised above their sum for the run (PLATTER_STREAMS_PER_USER),
so all of them are really open; the UIs are served on the portal's origin
(PLATTER_PROXY_ON_PORTAL_ORIGIN, no UI domain): the same transport, no ticket round trip.
Prints p50/p95/p99 per page and phase and the loaded/idle ratio of p99 (the aim: at most
1.5); writes bench/out/streams.png. Exits 1 when a ratio is over the aim or a stream did not
open.
"""

import argparse
import asyncio
import math
import os
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import django
import httpx
import psycopg

from bench import plotting
from bench.load import database_url, free_port, start, stop

STREAMS_DB = "platter_streams"
STREAMS_REDIS_DB = "12"
SITE = "bench-streams"
AIM = 1.5
DRIP_EVERY_S = 5


# ------------------------------------------------------------------ the slow UI


async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Headers at once, then one byte every DRIP_EVERY_S for as long as the reader stays."""
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        while True:
            writer.write(b"1\r\n.\r\n")
            await writer.drain()
            await asyncio.sleep(DRIP_EVERY_S)
    except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
        pass  # the reader left, or the bench is over
    finally:
        writer.close()


async def serve_ui(sock: socket.socket) -> None:
    server = await asyncio.start_server(drip, sock=sock, backlog=1024)
    async with server:
        await server.serve_forever()


# ------------------------------------------------------------------ the stack


def isolate() -> str:
    os.environ.update(
        PLATTER_SITE=SITE,
        DEBUG="0",
        PLATTER_UI_DOMAIN="",
        PLATTER_PROXY_ON_PORTAL_ORIGIN="1",
        PLATTER_API_RATE_USER="60000/min",
        PLATTER_API_RATE_TOKEN="60000/min",  # noqa: S106 (a rate, not a secret)
    )
    from django.conf import settings

    admin_url = database_url(settings.DATABASES["default"]["NAME"])
    redis = settings.REDIS_URL.rsplit("/", 1)[0] + "/" + STREAMS_REDIS_DB
    os.environ.update(REDIS_URL=redis, DATABASE_URL=database_url(STREAMS_DB))
    settings.DATABASES["default"]["NAME"] = STREAMS_DB
    settings.CACHES["default"]["LOCATION"] = redis
    return admin_url


def recreate_database(admin_url: str, drop_only: bool = False) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {STREAMS_DB} WITH (FORCE)")
        if not drop_only:
            conn.execute(f"CREATE DATABASE {STREAMS_DB}")


@dataclass
class Stack:
    url: str = ""
    alice_token: str = ""
    bob_token: str = ""
    alice_session: str = ""
    bob_session: str = ""
    alice_cluster: int = 0
    bob_cluster: int = 0
    ui_port: int = 0
    ticker: object = None
    processes: list = field(default_factory=list)


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


def prepare(stack: Stack) -> None:
    """Schema, the lab's inventory, the catalog, alice's and bob's clusters and credentials,
    and the ticking container on the first lab node."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.catalog.models import ProductVersion
    from apps.clusters.models import Cluster, Instance
    from apps.inventory.models import Address, Network
    from apps.lab import lab
    from apps.nodes import engine
    from apps.tokens.services import issue_token

    if not lab.is_up():
        raise SystemExit("the lab is not running: start it with ./platter lab up")
    call_command("migrate", verbosity=0)
    node = lab.sync_inventory()[0]
    call_command("load_catalog", verbosity=0)
    ticker = engine.cached(node).containers.run(
        settings.NODE_HELPER_IMAGE,
        ["sh", "-c", "while true; do echo tick $(date +%s); sleep 1; done"],
        detach=True,
        labels={"platter.site": SITE},
        network_mode="none",
    )
    assert ticker.id, "a started container has its id"
    stack.ticker = ticker
    version = ProductVersion.objects.get(product__name="demo")
    version.ports = [{"role": "master", "port": stack.ui_port, "name": "Slow UI", "ui": True}]
    version.save()
    network = Network.objects.create(
        name="bench-streams",
        subnet="127.0.0.0/8",
        gateway="127.0.0.254",
        first_address="127.0.0.1",
        last_address="127.0.0.2",
    )
    users = {}
    for name in ("alice", "bob"):
        user = get_user_model().objects.create_user(f"streams-{name}")
        cluster = Cluster.objects.create(owner=user, version=version, name=name, state="running")
        Instance.objects.create(
            cluster=cluster,
            role="master",
            index=0,
            hostname="master-0",
            cores=1,
            memory_mb=64,
            disks=0,
            node=node,
            container_id=ticker.id,
            address=Address.objects.get_or_create(  # the network's pool may hold it already
                network=network, ip="127.0.0.1" if name == "alice" else "127.0.0.2"
            )[0],
            active=True,
            state="running",
        )
        users[name] = (user, cluster)
    (alice, stack.alice_cluster), (bob, stack.bob_cluster) = (
        (users["alice"][0], users["alice"][1].id),
        (users["bob"][0], users["bob"][1].id),
    )
    stack.alice_token = issue_token(alice, "bench-streams").secret
    stack.bob_token = issue_token(bob, "bench-streams").secret
    stack.alice_session, stack.bob_session = session_for(alice), session_for(bob)


def start_server(port: int, limit: int, out: Path):
    from apps.lab.devservers import web_command

    os.environ["PLATTER_STREAMS_PER_USER"] = str(limit)
    server = start(web_command(f"127.0.0.1:{port}"), out / "streams-web.log")
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return server
        except httpx.HTTPError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"the web server did not start; see {out}/streams-web.log"
                ) from None
            time.sleep(0.3)


# ------------------------------------------------------------------ the measurement


async def timed(client: httpx.AsyncClient, path: str, samples: int) -> tuple[list[float], int]:
    """Seconds of each request, one after another, and how many did not answer 200."""
    seconds, bad = [], 0
    for _ in range(samples):
        begun = time.perf_counter()
        try:
            response = await client.get(path)
            if response.status_code != 200:
                bad += 1
                print(f"# {path}: {response.status_code} {response.text[:200]}")
        except httpx.HTTPError as error:
            bad += 1
            print(f"# {path}: {error!r}")
        seconds.append(time.perf_counter() - begun)
    return seconds, bad


async def bobs_times(stack: "Stack", page: str, listing: str, samples: int) -> dict:
    """bob's timings, taken on a loop and thread of their own: alice's 250 streams keep this
    loop busy reading, which must not count as the portal's latency."""

    async def run() -> dict:
        timeout = httpx.Timeout(60)
        headers = {"Authorization": f"Bearer {stack.bob_token}"}
        async with (
            httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=timeout) as api,
            httpx.AsyncClient(
                base_url=stack.url, cookies={"sessionid": stack.bob_session}, timeout=timeout
            ) as web,
        ):
            return {
                "page": await timed(web, page, samples),
                "list": await timed(api, listing, samples),
            }

    return await asyncio.to_thread(asyncio.run, run())


async def hold(
    client: httpx.AsyncClient, path: str, opened: list[int], stop: asyncio.Event, received: Counter
):
    """One stream: open it, note its status, read it until told to stop."""
    try:
        async with client.stream("GET", path) as response:
            opened.append(response.status_code)
            reading = asyncio.ensure_future(_drain(response, received))
            await stop.wait()
            reading.cancel()
    except httpx.HTTPError as error:
        opened.append(0)
        print(f"# a stream of alice's got no answer: {error!r}")


async def _drain(response: httpx.Response, received: Counter) -> None:
    kind = "follows" if "/logs" in str(response.url) else "drips"
    async for chunk in response.aiter_raw():
        received[kind] += len(chunk)


async def measure(stack: Stack, follows: int, drips: int, samples: int) -> dict:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(60, read=None)
    bob_api = httpx.AsyncClient(
        base_url=stack.url,
        headers={"Authorization": f"Bearer {stack.bob_token}"},
        timeout=timeout,
    )
    bob_web = httpx.AsyncClient(
        base_url=stack.url, cookies={"sessionid": stack.bob_session}, timeout=timeout
    )
    alice_api = httpx.AsyncClient(
        base_url=stack.url,
        headers={"Authorization": f"Bearer {stack.alice_token}"},
        limits=limits,
        timeout=timeout,
    )
    alice_web = httpx.AsyncClient(
        base_url=stack.url,
        cookies={"sessionid": stack.alice_session},
        limits=limits,
        timeout=timeout,
    )
    page = f"/clusters/{stack.bob_cluster}/"
    listing = "/api/v1/clusters"
    follow = f"/api/v1/clusters/{stack.alice_cluster}/logs?follow=true&seconds=300&tail=5"
    ui = f"/clusters/{stack.alice_cluster}/ui/master-0/{stack.ui_port}/slow"
    results: dict = {}
    try:
        await timed(bob_web, page, 10)  # warm every worker's imports and caches
        await timed(bob_api, listing, 10)
        results["idle"] = await bobs_times(stack, page, listing, samples)
        stop = asyncio.Event()
        opened: list[int] = []
        received: Counter = Counter()  # bytes alice's streams got: they really flow
        holders = [
            asyncio.ensure_future(hold(alice_api, follow, opened, stop, received))
            for _ in range(follows)
        ] + [
            asyncio.ensure_future(hold(alice_web, ui, opened, stop, received)) for _ in range(drips)
        ]
        deadline = time.monotonic() + 120
        while len(opened) < follows + drips and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        results["opened"] = list(opened)
        results["loaded"] = await bobs_times(stack, page, listing, samples)
        results["still_open"] = sum(not h.done() for h in holders)
        results["received"] = dict(received)
        stop.set()
        await asyncio.gather(*holders, return_exceptions=True)
    finally:
        for client in (bob_api, bob_web, alice_api, alice_web):
            await client.aclose()
    return results


# ------------------------------------------------------------------ report


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def report(results: dict, follows: int, drips: int, notes: list[str]) -> bool:
    for note in notes:
        print(f"# {note}")
    opened = results["opened"]
    ok = sum(status == 200 for status in opened)
    others = Counter(status for status in opened if status != 200)
    print(
        f"# alice's streams: {follows} follows + {drips} drips asked, {ok} open (200), "
        f"{len(opened) - ok} not {dict(others) or ''}(0: no answer); "
        f"{results['still_open']} still open after the loaded phase; bytes they received: "
        f"{results['received']}"
    )
    print(f"{'page':<28}{'phase':<8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'non-200':>9}")
    good = ok == follows + drips
    for name, label in (("page", "bob's cluster page"), ("list", "bob's API list")):
        for phase in ("idle", "loaded"):
            seconds, bad = results[phase][name]
            good &= bad == 0
            p50, p95, p99 = (percentile(seconds, q) * 1000 for q in (50, 95, 99))
            print(f"{label:<28}{phase:<8}{p50:>9.1f}{p95:>9.1f}{p99:>9.1f}{bad:>9}")
        ratio = percentile(results["loaded"][name][0], 99) / percentile(
            results["idle"][name][0], 99
        )
        good &= ratio <= AIM
        print(f"{label:<28}{'ratio':<8}{'':>18}{ratio:>9.2f}  (aim <= {AIM})")
    return good


def plot(results: dict, path: Path) -> None:
    plt = plotting.pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for axis, (name, label) in zip(
        axes, (("page", "bob's cluster page"), ("list", "bob's API list")), strict=True
    ):
        data = [[s * 1000 for s in results[phase][name][0]] for phase in ("idle", "loaded")]
        axis.boxplot(data, whis=(1, 99), showfliers=True)
        axis.set_xticks([1, 2], ["idle", "alice's streams open"])
        axis.set_title(label)
        axis.set_ylabel("ms per request")
    figure.suptitle("Another user's requests while one user holds streams open (whiskers p1-p99)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--follows", type=int, default=200)
    parser.add_argument("--drips", type=int, default=50)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args(argv)
    plotting.require()
    out = plotting.out_dir()
    admin_url = isolate()
    recreate_database(admin_url)
    django.setup()
    stack = Stack()
    ui = socket.socket()
    ui.bind(("127.0.0.1", 0))
    stack.ui_port = ui.getsockname()[1]
    try:
        prepare(stack)
        port = free_port()
        stack.processes.append(start_server(port, args.follows + args.drips + 10, out))
        stack.url = f"http://127.0.0.1:{port}"

        # The slow UI on a loop and thread of its own: the bench's busy client loop must not
        # be what makes it slow to answer.
        threading.Thread(target=asyncio.run, args=(serve_ui(ui),), daemon=True).start()
        results = asyncio.run(measure(stack, args.follows, args.drips, args.samples))
        workers = os.environ.get("GUNICORN_WORKERS", "the config's default")
        notes = [
            f"own stack: gunicorn with uvicorn workers ({workers}) on {stack.url}, "
            f"database {STREAMS_DB}, Redis database {STREAMS_REDIS_DB}, site {SITE}",
            f"{args.samples} requests per page and phase, one after another; the UI drips a "
            f"byte every {DRIP_EVERY_S} s, the container logs a line a second",
        ]
        good = report(results, args.follows, args.drips, notes)
        plot(results, out / "streams.png")
        print(f"# plot: {out / 'streams.png'}")
    finally:
        for process in stack.processes:
            stop(process)
        if stack.ticker is not None:
            stack.ticker.remove(force=True)  # type: ignore[attr-defined]
        from django.db import connections

        connections.close_all()
        recreate_database(admin_url, drop_only=True)
    raise SystemExit(0 if good else 1)


if __name__ == "__main__":
    main()
