"""The load proof of `./platter run`'s web server: 40 launches at once from 4 users, through
gunicorn started the way `./platter run` starts it (apps.lab.devservers.start_web), against the
test database, a real Celery worker and the lab's nodes with the demo product. Not one
connection error, not one answer of 500 or more, and no disk ever held twice."""

import asyncio
import os
import time

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from apps.accounts.models import Quota
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.lab import devservers
from apps.lab.tests.test_devservers import free_port
from apps.tokens.services import issue_token
from conftest import _database_url
from portal.tests.bench_scripts import load_bench

USERS = 4
LAUNCHES = 40
PRODUCT = "/api/v1/products/demo/1.0"
WORKING = ("placing", "configuring", "stopping", "destroying")


@pytest.fixture
def run_web_server(django_db_setup, tmp_path):
    """`./platter run`'s web server (gunicorn, deploy/gunicorn.conf.py) on the test database and
    the test broker, handing launches to the test's worker."""
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        "PLATTER_DISPATCH_CLUSTER_TASKS": "1",
    }
    log = (tmp_path / "web.log").open("w")
    server = devservers.start_web(address, env, log)
    try:
        devservers.wait_for_web(address, server)
        yield f"http://{address}", tmp_path / "web.log"
    finally:
        devservers.stop_process(server)
        log.close()


async def launch_all(url: str, tokens: list[str]) -> list[int]:
    """Every launch at once, each user on a client of its own; 0 for no answer."""
    clients = [
        httpx.AsyncClient(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"})
        for token in tokens
    ]

    async def launch(number: int) -> int:
        client = clients[number % len(clients)]
        body = {"size": 1, "disks": 1, "lease": 1, "name": f"load-{number}"}
        try:
            return (await client.post(PRODUCT, json=body)).status_code
        except httpx.HTTPError:  # connection reset, refused, timed out: the failures counted
            return 0

    try:
        return await asyncio.gather(*(launch(n) for n in range(LAUNCHES)))
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))


def wind_down(url: str, mine, token_of: dict[int, str], checks) -> tuple[list[str], list[int]]:
    """Destroy every cluster through the API, queued ones first (so a release admits none of
    them), asking again while one is busy (409), until all are destroyed; returns the disks
    seen held twice meanwhile and every answer's status."""
    doubled: list[str] = []
    answers: list[int] = []
    deadline = time.monotonic() + 300
    with httpx.Client(base_url=url, timeout=60) as client:
        while time.monotonic() < deadline:
            left = mine.exclude(state__in=("destroyed", "destroying"))
            if not left.exists() and not mine.filter(state="destroying").exists():
                break
            settled = left.filter(state__in=("queued", "running", "failed", "stopped"))
            for cluster in sorted(settled, key=lambda c: (c.state != "queued", c.id)):
                headers = {"Authorization": f"Bearer {token_of[cluster.owner_id]}"}
                try:
                    answers.append(
                        client.delete(f"/api/v1/clusters/{cluster.id}", headers=headers).status_code
                    )
                except httpx.HTTPError:
                    answers.append(0)
            doubled += checks.disks_held_twice()
            time.sleep(1)
    return doubled, answers


def watch_disks(checks, until, seconds: float) -> list[str]:
    """Double-held disks seen while clusters are placed or destroyed, checked twice a second
    until `until()` holds (or `seconds` pass)."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen += checks.disks_held_twice()
        if until():
            break
        time.sleep(0.5)
    return seen


@pytest.mark.timeout(900)
@pytest.mark.django_db(transaction=True)
def test_forty_launches_at_once_from_four_users_get_answers_and_never_share_a_disk(
    dispatching, lab_cleanup, run_web_server
):
    url, web_log = run_web_server
    checks = load_bench("load").load_checks
    load_catalog()
    users = [get_user_model().objects.create_user(f"load-{n}") for n in range(USERS)]
    for user in users:  # room for every launch: the ones that do not fit now wait in the queue
        Quota.objects.create(user=user, max_clusters=LAUNCHES)
    tokens = [issue_token(user, "load").secret for user in users]
    owner_ids = [user.id for user in users]
    mine = Cluster.objects.filter(owner__in=owner_ids)

    statuses = asyncio.run(launch_all(url, tokens))

    assert statuses.count(0) == 0, f"connection errors: {statuses}"
    assert [s for s in statuses if s >= 500] == [], web_log.read_text()[-3000:]
    assert statuses.count(202) == LAUNCHES, statuses
    assert mine.count() == LAUNCHES
    # Placement runs on the worker: no disk held twice while it places what fits.
    doubled = watch_disks(
        checks,
        until=lambda: (
            not mine.filter(state__in=("placing", "configuring")).exists()
            and mine.filter(state="running").exists()
        ),
        seconds=300,
    )
    assert doubled == []
    placed = mine.filter(state="running").count()
    assert placed > 0

    doubled, answers = wind_down(url, mine, dict(zip(owner_ids, tokens, strict=True)), checks)
    assert doubled == []
    assert [a for a in answers if a >= 500 or a == 0] == []
    assert set(mine.values_list("state", flat=True)) == {"destroyed"}
    assert checks.disk_states() == [] and checks.address_states() == []
    assert checks.clusters_left(owner_ids) == []
    print(f"\n40 launches: {placed} placed at once, the rest queued; web log: {web_log}")


async def refused_posts(url: str, rounds: int) -> list[int]:
    """Rounds of 40 launches at once with a token nobody has: the API refuses them before it
    reads their bodies. 0 for no answer within 30 s."""
    clients = [
        httpx.AsyncClient(base_url=url, timeout=30, headers={"Authorization": "Bearer nobody"})
        for _ in range(USERS)
    ]

    async def post(number: int) -> int:
        body = {"size": 1, "disks": 1, "name": "x" * 20_000}
        try:
            return (await clients[number % USERS].post(PRODUCT, json=body)).status_code
        except httpx.HTTPError:
            return 0

    try:
        statuses = []
        for _ in range(rounds):
            statuses += await asyncio.gather(*(post(n) for n in range(LAUNCHES)))
        return statuses
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))


@pytest.mark.django_db(transaction=True)
def test_refused_posts_at_once_never_leave_the_server_stuck(run_web_server):
    """A body left unread on a keep-alive connection must not block a gunicorn thread for good
    (benoitc/gunicorn#3301; without portal.drain.BodyDrained some of these never got an
    answer)."""
    url, _ = run_web_server
    statuses = asyncio.run(refused_posts(url, rounds=3))
    assert statuses == [401] * 3 * LAUNCHES
