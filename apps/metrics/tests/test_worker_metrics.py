"""What the real Celery worker records, scraped from /metrics: task outcomes, and a launch on
the lab (its reservation and placement latency)."""

import time

import pytest
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster
from portal.celery import app

from .conftest import value, wait_for_sample

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_that_raises_is_counted_as_a_failure(scrape, celery_worker_process):
    ok = app.send_task("platter.ping")
    broken = app.send_task("platter.ping", args=["an argument ping does not take"])
    assert ok.get(timeout=60) == "pong"
    broken.get(timeout=60, propagate=False)
    assert broken.failed()

    samples = wait_for_sample(
        scrape, "platter_tasks_total", 1, task="platter.ping", state="FAILURE"
    )
    assert value(samples, "platter_task_failures_total", task="platter.ping") == 1
    assert value(samples, "platter_tasks_total", task="platter.ping", state="FAILURE") == 1
    samples = wait_for_sample(
        scrape, "platter_tasks_total", 1, task="platter.ping", state="SUCCESS"
    )
    assert value(samples, "platter_tasks_total", task="platter.ping", state="SUCCESS") == 1


def test_a_launch_on_the_lab_records_its_reservation_and_placement(
    scrape, dispatching, lab_cleanup, alice
):
    call_command("load_catalog", verbosity=0)
    demo = ProductVersion.objects.get(product__name="demo")
    cluster = services.launch(alice, demo, "measured", {"size": 1})

    deadline = time.monotonic() + 90
    while Cluster.objects.get(id=cluster.id).state != Cluster.State.RUNNING:
        assert time.monotonic() < deadline, list(Cluster.objects.get(id=cluster.id).events.all())
        time.sleep(0.1)

    # The task's outcome is counted last, after everything the launch recorded.
    task = {"task": "platter.launch_cluster", "state": "SUCCESS"}
    samples = wait_for_sample(scrape, "platter_tasks_total", 1, **task)
    assert value(samples, "platter_tasks_total", **task) == 1
    assert value(samples, "platter_placement_seconds_count", outcome="running") == 1
    assert value(samples, "platter_placement_seconds_sum", outcome="running") > 0
    assert value(samples, "platter_reservation_seconds_count", outcome="reserved") == 1
    assert value(samples, "platter_clusters", state="running") == 1
