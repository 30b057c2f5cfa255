"""Redis (the broker and the throttle cache) goes away under a running portal: requests still
get their answers, a launch committed to Postgres is never reported as a 500 (so no client
retries it into a second cluster), and beat's passes pick the work up once workers can."""

import shutil
import subprocess
import time

import httpx
import pytest

from apps.catalog.services import load_catalog
from apps.clusters.admission import admit_queued
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node
from portal.tests.conftest import free_port, prod_server_factory  # noqa: F401 (a fixture)

from .conftest import token_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def private_redis():
    """A redis-server of this test's own, so it can be stopped without touching anyone's."""
    port = free_port()
    server = subprocess.Popen(
        [
            shutil.which("redis-server") or "/usr/bin/redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 20
    while (
        subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout
        != b"PONG\n"
    ):
        assert time.monotonic() < deadline and server.poll() is None, "redis-server did not start"
        time.sleep(0.1)
    yield server, f"redis://127.0.0.1:{port}/0"
    server.terminate()
    server.wait(timeout=20)


@pytest.fixture
def portal_without_redis(prod_server_factory, private_redis, alice):  # noqa: F811
    """A production portal that started with Redis, which then stopped."""
    load_catalog()
    make_network()
    make_node(cores=16, memory_mb=16384, disks={"hdd": 6})
    redis_server, redis_url = private_redis
    server = prod_server_factory(redis_url=redis_url)
    redis_server.terminate()
    redis_server.wait(timeout=20)
    headers = {"Authorization": f"Bearer {token_for(alice)}", "X-Forwarded-Proto": "https"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        yield server, client


def test_a_launch_without_redis_is_accepted_once_and_picked_up_later(portal_without_redis):
    server, client = portal_without_redis
    body = {"product": "demo", "version": "1.0", "size": 1}
    first = client.post("/api/v1/clusters", json=body, headers={"Idempotency-Key": "try-1"})
    assert first.status_code == 202, first.text
    retry = client.post("/api/v1/clusters", json=body, headers={"Idempotency-Key": "try-1"})
    assert retry.status_code == 202 and retry.json()["id"] == first.json()["id"]
    assert Cluster.objects.count() == 1
    cluster = Cluster.objects.get()
    assert cluster.state == Cluster.State.QUEUED
    # Beat's admission pass (every 30 s) places it, as it would once Redis is back.
    assert admit_queued() == [cluster.id]
    assert "could not hand" in server.output() and "Internal Server Error" not in server.output()


def test_throttling_without_redis_lets_requests_through(portal_without_redis):
    server, client = portal_without_redis
    answers = [client.get("/api/v1/products").status_code for _ in range(3)]
    assert answers == [200, 200, 200]
    cesga = client.get("/bigdata/api/v1/products", headers={"x-auth-token": ""})
    assert cesga.status_code == 401
    assert "request rates are not checked" in server.output()


def test_stop_and_destroy_without_redis_are_accepted(portal_without_redis):
    server, client = portal_without_redis
    launched = client.post("/api/v1/products/demo/1.0", json={"size": 1}).json()
    admit_queued()
    Cluster.objects.filter(id=launched["id"]).update(state=Cluster.State.RUNNING)
    assert client.post(f"/api/v1/clusters/{launched['id']}/stop").status_code == 202
    Cluster.objects.filter(id=launched["id"]).update(state=Cluster.State.RUNNING)
    assert client.delete(f"/api/v1/clusters/{launched['id']}").status_code == 202
    assert Cluster.objects.get(id=launched["id"]).state == Cluster.State.DESTROYING
    assert "Internal Server Error" not in server.output()
