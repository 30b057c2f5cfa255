"""On the real lab, with a real worker: a demo cluster launched while its image is still being
prepared (as `./platter run` prepares the product images behind a portal that already answers)
waits in the queue naming the step, and runs once the preparation ends: the end wakes the
queue as `lab images` does (apps/lab/products.py)."""

import time

import pytest
from django.core.management import call_command

from apps.accounts.models import Quota
from apps.catalog import images
from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for
from apps.inventory.services import capacity_freed
from apps.lab.management.commands.seed_demo import DEMO_QUOTA

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_a_launch_waits_for_its_image_being_prepared_then_runs(dispatching, lab_cleanup, alice):
    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=alice, defaults=DEMO_QUOTA)
    demo = ProductVersion.objects.get(product__name="demo", version="1.0")
    [image] = images.version_images(demo)
    images.start_preparing([image], nodes_total=4)
    images.preparation_step(image, "pulling from the registry", nodes_ready=1)

    cluster = services.launch(alice, demo, "waits-for-its-image", {"size": 1, "mem": 64})
    words = f"image {image} is being prepared: 1 of 4 nodes (pulling from the registry)"
    deadline = time.monotonic() + 60
    while Cluster.objects.get(id=cluster.id).reason != words:  # the worker tried, and waits
        assert time.monotonic() < deadline, Cluster.objects.get(id=cluster.id).reason
        time.sleep(0.2)
    assert Cluster.objects.get(id=cluster.id).state == S.QUEUED

    images.preparation_ended(image)
    capacity_freed()  # what the preparation does once the images landed
    running = wait_for(cluster.id, S.RUNNING, seconds=120)
    assert running.events.filter(message=f"waiting: {words}").exists()
