"""A launch whose image is on no node is refused at once (409 naming the image), where the
site cannot pull images (the lab, development), instead of queueing a cluster that would
never start."""

import pytest

from apps.catalog.images import site_image
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_node


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
