"""A launch whose image is on no node is refused at once (409 naming the image), where the
site cannot pull images (the lab, development), instead of queueing a cluster that would
never start."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.catalog import images
from apps.catalog.images import site_image
from apps.catalog.models import ImagePreparation
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node


@pytest.fixture
def no_pulls(settings):
    settings.IMAGE_PULLS = False


def test_it_answers_409_naming_the_image_no_node_holds(api, demo, no_pulls):
    make_node().__class__.objects.update(images=["platter/spark:4.3.0"])
    response = api("owner").post("/api/v1/products/demo/1.0", {}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "image_unavailable"
    assert body["images"] == ["platter/lab-base:1"]
    assert "image platter/lab-base:1 is on no active node" in body["message"]
    assert not Cluster.objects.exists()


def test_it_launches_once_an_active_node_holds_the_image(api, demo, no_pulls):
    node = make_node()
    node.images = ["platter/lab-base:1"]
    node.save()
    assert api("owner").post("/api/v1/products/demo/1.0", {}, format="json").status_code == 202


def test_a_drained_node_holding_the_image_does_not_count(api, demo, no_pulls):
    node = make_node(state="draining")
    node.images = ["platter/lab-base:1"]
    node.save()
    assert api("owner").post("/api/v1/products/demo/1.0", {}, format="json").status_code == 409


def test_the_launch_form_says_it_at_once(client, alice, demo, no_pulls):
    client.force_login(alice)
    page = client.get("/catalog/demo/1.0/launch").content.decode()
    assert "image platter/lab-base:1 is on no node of this site" in page
    catalog = client.get("/catalog/").content.decode()
    assert "image on no node" in catalog


def test_the_registry_prefix_applies_to_platters_own_images_only(settings):
    settings.IMAGE_REGISTRY = "reg.example.org/"
    assert site_image("platter/spark:4.3.0") == "reg.example.org/platter/spark:4.3.0"
    assert site_image("mongo:7.0") == "mongo:7.0"
    settings.IMAGE_REGISTRY = ""
    assert site_image("platter/spark:4.3.0") == "platter/spark:4.3.0"


# ------------------------------------------------------------------ images being prepared
# `./platter run` answers before the product images are on the nodes: a launch of a version
# whose image is being prepared queues with the step as its reason and goes on once it landed.


def test_a_launch_of_an_image_being_prepared_queues_naming_the_step_then_places(
    api, demo, no_pulls, alice
):
    from apps.clusters import admission
    from apps.clusters.reservation import Rejection, Reservation

    make_network()
    node = make_node()
    images.start_preparing(["platter/lab-base:1"], nodes_total=4)
    images.preparation_step("platter/lab-base:1", "pulling from the registry", nodes_ready=1)

    response = api("owner").post("/api/v1/products/demo/1.0", {}, format="json")
    assert response.status_code == 202
    cluster = Cluster.objects.get()
    waiting = admission.reserve_or_fail(cluster.id)
    assert isinstance(waiting, Rejection) and waiting.cause == "image"
    cluster.refresh_from_db()
    words = "image platter/lab-base:1 is being prepared: 1 of 4 nodes (pulling from the registry)"
    assert cluster.state == Cluster.State.QUEUED and cluster.reason == words
    assert cluster.events.filter(message=f"waiting: {words}").exists()

    # It landed: the node holds it and the preparation ended; the next pass places it.
    node.images = ["platter/lab-base:1"]
    node.save()
    images.preparation_ended("platter/lab-base:1")
    assert isinstance(admission.reserve_or_fail(cluster.id), Reservation)


def test_a_failed_preparation_fails_the_waiting_cluster_with_its_reason(api, demo, no_pulls):
    from apps.clusters import admission

    make_node()
    images.start_preparing(["platter/lab-base:1"], nodes_total=1)
    assert api("owner").post("/api/v1/products/demo/1.0", {}, format="json").status_code == 202
    cluster = Cluster.objects.get()
    images.preparation_ended("platter/lab-base:1", "Maven Central answered 503")
    assert admission.reserve_or_fail(cluster.id) is None
    cluster.refresh_from_db()
    assert cluster.state == Cluster.State.FAILED
    assert (
        cluster.reason
        == "image platter/lab-base:1 could not be prepared (Maven Central answered 503)"
    )
    # ...and a new launch is refused at once, as for any image on no node.
    assert api("owner").post("/api/v1/products/demo/1.0", {}, format="json").status_code == 409


def test_a_preparation_silent_for_too_long_is_no_longer_waited_for(api, demo, no_pulls):
    make_node()
    images.start_preparing(["platter/lab-base:1"], nodes_total=1)
    long_ago = timezone.now() - images.PREPARATION_SILENT_FOR - timedelta(seconds=1)
    ImagePreparation.objects.update(updated=long_ago)
    assert api("owner").post("/api/v1/products/demo/1.0", {}, format="json").status_code == 409


def test_the_catalog_and_the_launch_form_say_how_far_the_image_is(client, alice, demo, no_pulls):
    make_node()
    images.start_preparing(["platter/lab-base:1"], nodes_total=4)
    images.preparation_step("platter/lab-base:1", "building on lab-1", nodes_ready=0)
    client.force_login(alice)
    catalog = client.get("/catalog/").content.decode()
    demo_line = catalog.split('aria-label="Launch Demo cluster 1.0"')[1].split("</li>")[0]
    assert (
        "image platter/lab-base:1 is being prepared: 0 of 4 nodes (building on lab-1)" in demo_line
    )
    assert "image on no node" not in demo_line
    form = client.get("/catalog/demo/1.0/launch").content.decode()
    assert "Not ready yet: image platter/lab-base:1 is being prepared" in form
    assert "starts once its image is on the nodes" in form


def test_each_step_keeps_a_long_preparation_alive(api, demo, no_pulls):
    make_node()
    images.start_preparing(["platter/lab-base:1"], nodes_total=1)
    long_ago = timezone.now() - images.PREPARATION_SILENT_FOR - timedelta(seconds=1)
    ImagePreparation.objects.update(updated=long_ago)
    images.preparation_step("platter/lab-base:1", "pulling from the registry", nodes_ready=1)
    assert api("owner").post("/api/v1/products/demo/1.0", {}, format="json").status_code == 202
