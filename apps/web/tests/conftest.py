"""Fixtures the web tests share: a signed-in client, a small pool with one cluster, the
`./platter run` seed, and a browser page on the live server."""

import os

import pytest
from django.core.management import call_command

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import (
    make_cluster,
    make_network,
    make_node,
    make_roomy_node,
    wants,
)


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def pool(db):
    make_network()
    return [make_node(disks={"hdd": 6, "ssd": 2}) for _ in range(3)]


@pytest.fixture
def mine(alice, pool) -> Cluster:
    return make_cluster(
        alice, wants(2, cores=1, memory_mb=64, disks=1), name="mine", lease_hours=24
    )


@pytest.fixture
def seeded(db):
    """The demo and admin logins, the demo quota and the catalog, as `./platter run` has."""
    call_command("seed_demo", stdout=open(os.devnull, "w"))  # noqa: SIM115
    make_roomy_node()  # `./platter run` has the lab; a launch on an empty pool is refused


@pytest.fixture
def page(browser, live_server):
    """A fresh browser page on the live server (Chromium from the root conftest)."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1100, "height": 900})
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()
