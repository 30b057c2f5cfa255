"""`platter resize` against the live test server; the test plays the worker (the resize runs
over fake nodes in the test's process), so the command's waiting and exit codes are tested."""

import subprocess
import time

import pytest

from apps.clusters.models import Cluster, ScalingPolicy
from apps.clusters.tests.factories import make_network, make_node
from apps.inventory.models import Disk
from apps.nodes.fake import FakeNodes
from workers import operations
from workers.tests.fake_launch import running

from .conftest import PLATTER, user_environment

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_cluster(alice, catalog_loaded):
    make_network()
    for _ in range(2):
        make_node(disks={"hdd": 4})
    with FakeNodes():
        yield running(alice, "demo", size=1, mem=64)


def resizing(cluster: Cluster, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not Cluster.objects.filter(id=cluster.id, state="resizing").exists():
        assert time.monotonic() < deadline, "the command asked for no resize"
        time.sleep(0.1)


def test_resize_asks_and_refusals_name_why(logged_in, demo_cluster):
    refused = logged_in("resize", demo_cluster.name, "--workers", "20")
    assert refused.returncode == 1
    assert "role worker allows 1 to 8 instances; asked 20" in refused.stderr
    asked = logged_in("resize", demo_cluster.name, "--workers", "2")
    assert asked.returncode == 0, asked
    assert asked.stdout == f"Cluster {demo_cluster.id} ({demo_cluster.name}) is resizing.\n"
    assert logged_in("resize", demo_cluster.name).returncode == 2  # --workers is required


@pytest.mark.parametrize(("room", "code"), [(True, 0), (False, 1)])
def test_resize_wait_exits_with_how_the_resize_ended(logged_in, home, demo_cluster, room, code):
    command = [str(PLATTER), "resize", demo_cluster.name, "--workers", "2", "--wait"]
    waiting = subprocess.Popen(
        command, env=user_environment(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        resizing(demo_cluster)
        if not room:
            Disk.objects.filter(state=Disk.State.AVAILABLE).update(state=Disk.State.FAILED)
        assert operations.run("resize", demo_cluster.id) == "running"
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == code, (out, err)
    if room:
        assert b"resized to 2 workers" in out
    else:
        assert b"resize failed: needs" in err


def test_resize_gives_a_role_new_cores_or_memory(logged_in, demo_cluster):
    refused = logged_in("resize", demo_cluster.name, "--role", "worker", "--cores", "9")
    assert refused.returncode == 1
    assert "a worker of demo 1.0 may have 1 to 2 cores; asked 9" in refused.stderr
    both = logged_in("resize", demo_cluster.name, "--workers", "2", "--role", "worker")
    assert both.returncode == 2 and "either --workers or --role" in both.stderr
    no_figure = logged_in("resize", demo_cluster.name, "--role", "worker")
    assert no_figure.returncode == 2 and "--cores and/or --memory-mb" in no_figure.stderr
    asked = logged_in(
        "resize", demo_cluster.name, "--role", "worker", "--cores", "2", "--memory-mb", "128"
    )
    assert asked.returncode == 0, asked
    assert asked.stdout == f"Cluster {demo_cluster.id} ({demo_cluster.name}) is resizing.\n"
    worker = demo_cluster.instances.get(role="worker", active=True)
    assert (worker.cores, worker.memory_mb) == (2, 128)


def test_autoscale_sets_shows_and_takes_away_a_policy(logged_in, alice, catalog_loaded):
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4, "ssd": 4})
    with FakeNodes():
        spark = running(alice, "spark", size=1, mem=1024)
    shown = logged_in("autoscale", spark.name)
    assert shown.returncode == 0 and shown.stdout.startswith("No autoscaling policy")
    refused = logged_in("autoscale", spark.name, "--min", "1", "--max", "3", "--cooldown", "5")
    assert refused.returncode == 1 and "the cooldown must be at least 120 s" in refused.stderr
    assert logged_in("autoscale", spark.name, "--min", "1").returncode == 2
    made = logged_in("autoscale", spark.name, "--min", "1", "--max", "3", "--down", "0.5")
    assert made.returncode == 0, made
    assert made.stdout.startswith("Autoscaling: 1 to 3 workers, deciding every 120 s")
    assert "down x0.5" in made.stdout and "No decision yet" in made.stdout
    assert logged_in("autoscale", spark.name, "--off").returncode == 0
    assert not ScalingPolicy.objects.exists()
