"""Shared pytest fixtures: personas, the real lab's inventory, a real Celery worker and a real
browser."""

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

BASE_DIR = Path(__file__).resolve().parent
# Helper modules the tests import: their asserts report as a test's own do.
pytest.register_assert_rewrite("workers.tests.fake_launch", "workers.tests.lab_products")

# Test tiers: a test is marked by the fixtures it asks for (directly or through another
# fixture), never by hand, so `./platter test --fast` (-m "not lab and not worker and not
# browser") cannot run one that needs the lab, a Celery worker or Chromium. Only tests that
# reach the lab without these fixtures (the lab's own tests) carry a hand-written `lab` mark.
TIER_FIXTURES = {
    "lab": {"lab_inventory", "lab_cleanup"},
    "worker": {"celery_worker_process"},
    "browser": {"browser"},
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in TIER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(marker)


@pytest.fixture(autouse=True)
def default_urlconf():
    """Each test starts with the portal's own URLs. A request for a product's UI origin sets
    its thread's URLs to the proxy's (apps.proxy.middleware), and Django sets them back only
    when the response is closed: a test that leaves a streamed response unread would leave
    the next test in that process reversing "web:..." against the proxy's URLs."""
    from django.urls import set_urlconf

    set_urlconf(None)
    yield
    set_urlconf(None)


@pytest.fixture
def alice(db):
    """The owner in most tests."""
    return get_user_model().objects.create_user("alice", "alice@example.org", "alice-pass-123")


@pytest.fixture
def bob(db):
    """Another user, who must never see alice's things."""
    return get_user_model().objects.create_user("bob", "bob@example.org", "bob-pass-123")


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("admin", "admin@example.org", "admin-pass-123")


# Fake nodes (apps/nodes/fake.py) and an inventory for them: the resize and notebook tests of
# the workers and of each product (apps/products/*/tests); workers/tests/fake_launch.py
# launches clusters on them. A test folder with a `pool` or `catalog` of its own keeps it.
@pytest.fixture
def fake_nodes():
    from apps.nodes.fake import FakeNodes

    with FakeNodes() as fake:
        yield fake


@pytest.fixture
def pool(db):
    """Three nodes of 4 HDDs and 4 SSDs on a network."""
    from apps.clusters.tests.factories import make_network, make_node

    make_network()
    return [make_node(disks={"hdd": 4, "ssd": 4}) for _ in range(3)]


@pytest.fixture
def catalog(db):
    from django.core.management import call_command

    call_command("load_catalog", verbosity=0)


@pytest.fixture
def lab_inventory(db):
    """The running lab's nodes, disks and network as inventory rows in the test database.

    Function-scoped on purpose: transactional tests flush the database after each test."""
    from apps.lab import lab

    if not lab.is_up():
        pytest.fail("the lab is not running: start it with ./platter lab up")
    return lab.sync_inventory()


def _database_url(db_settings: Mapping[str, Any]) -> str:
    user, host, port = db_settings["USER"], db_settings["HOST"], db_settings["PORT"]
    password = f":{db_settings['PASSWORD']}" if db_settings.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{db_settings['NAME']}"


def worker_log_path() -> Path:
    """The test worker's log (JSON lines), named after this run's site: parallel runs share
    STATE_DIR."""
    from django.conf import settings

    return settings.STATE_DIR / f"test-worker-{settings.PLATTER_SITE}.log"


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real `celery worker` process on the test broker and the test database.

    Tests that hand it work must use transactional databases (``transaction=True``), since
    the worker only sees committed rows."""
    from django.conf import settings

    from portal.celery import app
    from portal.queues import worker_command

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        # The worker hands follow-up work (a launch after admission, ...) to itself.
        "PLATTER_DISPATCH_CLUSTER_TASKS": "1",
        # JSON lines, so tests can find a task's request and cluster ids in them.
        "PLATTER_LOG_FORMAT": "json",
    }
    settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
    app.control.purge()  # tasks an interrupted earlier run left for clusters long gone
    log = open(worker_log_path(), "w")  # noqa: SIM115 (closed at teardown)
    worker = subprocess.Popen(
        worker_command(
            f"test-{os.getpid()}",
            "-P",
            "threads",
            "-c",
            "4",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "info",
        ),
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if worker.poll() is not None or time.monotonic() > deadline:
            worker.kill()
            pytest.fail(f"the Celery worker did not start; see {log.name}")
    yield worker
    worker.terminate()
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        worker.kill()
    log.close()


@pytest.fixture
def dispatching(settings, celery_worker_process):
    """Launch, stop, start and destroy requests go to the real worker (after commit)."""
    settings.DISPATCH_CLUSTER_TASKS = True
    return celery_worker_process


@pytest.fixture
def lab_cleanup(lab_inventory):
    """Whatever a test leaves on the lab's nodes under this run's site label (containers,
    data folders) is removed afterwards, even when the test failed half-way."""
    yield lab_inventory
    from django.conf import settings
    from docker.errors import APIError

    from apps.inventory.models import Disk
    from apps.nodes import engine

    for node in lab_inventory:
        client = engine.cached(node)
        # ignore_removed: a container gone between the listing and its inspection (a helper
        # ending) is skipped, not an error.
        for container in client.containers.list(
            all=True,
            filters={"label": f"platter.site={settings.PLATTER_SITE}"},
            ignore_removed=True,
        ):
            try:
                container.remove(force=True)
            except APIError as error:
                # Gone, or being removed by whoever started it meanwhile (a worker's helper
                # container, e.g. the perimeter's, removes itself when it ends): either way
                # it goes. Anything else is still an error.
                if error.status_code not in (404, 409):
                    raise
    for disk in Disk.objects.filter(node__in=lab_inventory):
        shutil.rmtree(Path(disk.mount_path) / settings.PLATTER_SITE, ignore_errors=True)
    # The nodes' perimeter tables of this site (the lab's nodes are this host).
    from apps.clusters.perimeter import tables_of_nodes
    from apps.lab import host
    from workers import perimeter

    tables = tables_of_nodes([node.name for node in lab_inventory], settings.PLATTER_SITE)
    for table in host.nft_tables_matching(tables):
        host.delete_nft_table(table)
    perimeter.forget(list(lab_inventory))


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright (no browser download), one per test module."""
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (./platter installs it)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are
    # still plain synchronous ones (the live server answers from its own thread).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
