"""Launching: POST /products/<product>/<version> and POST /clusters."""

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import Quota
from apps.clusters.models import Cluster

from .conftest import PERSONAS, make_cluster

LAUNCH = {
    "anonymous": 401,
    "owner": 202,
    "other": 202,
    "read_only": 403,
    "expired": 401,
    "revoked": 401,
    "admin": 202,
}


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_full_tokens_launch_from_the_version(api, demo, persona):
    response = api(persona).post("/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == LAUNCH[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_full_tokens_launch_from_the_cluster_list(api, demo, persona):
    body = {"product": "demo", "version": "1.0", "size": 1}
    assert api(persona).post("/api/v1/clusters", body, format="json").status_code == LAUNCH[persona]


def test_it_answers_202_with_the_queued_cluster_and_its_location(api, demo, alice):
    response = api("owner").post(
        "/api/v1/products/demo/1.0",
        {"size": 3, "cpu": 2, "name": "web", "lease": 2, "message": "hi"},
        format="json",
    )
    assert response.status_code == 202
    body = response.json()
    cluster = Cluster.objects.get(id=body["id"])
    assert cluster.owner == alice and cluster.name == "web" and cluster.state == "queued"
    assert response["Location"] == body["url"] == f"http://testserver/api/v1/clusters/{cluster.id}"
    assert body["state"] == "queued" and body["product"] == "demo" and body["version"] == "1.0"
    assert [i["hostname"] for i in body["instances"]] == [
        "master-0",
        "worker-0",
        "worker-1",
        "worker-2",
    ]
    assert {i["cores"] for i in body["instances"]} == {2}
    assert body["expires_at"] is not None
    assert body["events"][0]["message"] == "queued"
    assert cluster.options == {"size": 3, "cpu": 2, "message": "hi"}


def test_it_launches_with_an_empty_body_and_names_the_cluster(api, demo):
    first = api("owner").post("/api/v1/products/demo/1.0", {}, format="json").json()
    second = api("owner").post("/api/v1/products/demo/1.0", {}, format="json").json()
    assert (first["name"], second["name"]) == ("demo-1", "demo-2")
    assert len(first["instances"]) == 3  # master + the default 2 workers


def test_it_names_each_bad_option(api, demo):
    response = api("owner").post(
        "/api/v1/products/demo/1.0", {"size": 99, "cpu": "many", "colour": "red"}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == 400 and body["error"] == "invalid_options"
    assert set(body["fields"]) == {"size", "cpu", "colour"}
    assert "between 1 and 8" in body["fields"]["size"]
    assert Cluster.objects.count() == 0


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "not a slug!"}, "name"),
        ({"lease": -1}, "lease"),
        ({"lease": "soon"}, "lease"),
        ({"disk_kind": "tape"}, "disk_kind"),
        ({"reuse_data_from": 999999}, "reuse_data_from"),
    ],
)
def test_it_rejects_bad_launch_keys_by_name(api, demo, body, field):
    response = api("owner").post("/api/v1/products/demo/1.0", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_it_rejects_a_body_that_is_not_an_object(api, demo):
    response = api("owner").post("/api/v1/products/demo/1.0", [1, 2], format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"options": "must be a JSON object, got list"}


def test_it_refuses_to_reuse_someone_elses_data(api, demo, bob):
    theirs = make_cluster(bob, demo, state="destroyed")
    response = api("owner").post(
        "/api/v1/products/demo/1.0", {"reuse_data_from": theirs.id}, format="json"
    )
    assert response.status_code == 400 and "reuse_data_from" in response.json()["fields"]


def test_it_answers_403_naming_the_quota_limit(api, demo, alice):
    Quota.objects.create(user=alice, max_clusters=1, max_cores=2)
    response = api("owner").post("/api/v1/products/demo/1.0", {"size": 2}, format="json")
    assert response.status_code == 403
    body = response.json()
    assert body["error"] == "quota_exceeded" and "is 2 cores" in body["message"]
    assert body["quota"] == {
        "limit": "max_cores",
        "scope": "user alice",
        "asked": 3,
        "used": 0,
        "maximum": 2,
    }

    make_cluster(alice, demo, size=1, cpu=1)  # queued: counts as a live cluster
    body = api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json").json()
    assert body["quota"]["limit"] == "max_clusters"
    assert (body["quota"]["asked"], body["quota"]["used"], body["quota"]["maximum"]) == (1, 1, 1)


def test_it_answers_404_for_a_version_that_cannot_be_launched(api, demo):
    assert api("owner").post("/api/v1/products/demo/9.9", {}, format="json").status_code == 404
    response = api("owner").post(
        "/api/v1/clusters", {"product": "demo", "version": "9.9"}, format="json"
    )
    assert response.status_code == 400 and "version" in response.json()["fields"]


def test_it_needs_product_and_version_in_the_cluster_list_launch(api, demo):
    response = api("owner").post("/api/v1/clusters", {"size": 1}, format="json")
    assert response.status_code == 400 and "version" in response.json()["fields"]


def test_a_session_launch_needs_the_csrf_token(demo, alice):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    response = browser.post("/api/v1/products/demo/1.0", {}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["message"]
    browser.get("/tokens/")  # a page with a form sets the csrftoken cookie
    csrf = browser.cookies["csrftoken"].value
    response = browser.post("/api/v1/products/demo/1.0", {}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 202


def test_it_answers_409_naming_why_the_pool_could_never_run_the_cluster(api, demo, alice):
    from apps.clusters.tests.factories import make_node
    from apps.inventory.models import Node

    Node.objects.update(state=Node.State.DRAINING)  # the roomy node is leaving the pool
    response = api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["error"] == "never_fits"
    assert response.json()["message"].endswith("the pool has no node")

    make_node(disks={"hdd": 2})
    response = api("owner").post(
        "/api/v1/products/demo/1.0", {"size": 1, "disks": 3}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["message"] == (
        "this cluster could never run on this pool: an instance asks for 3 HDD disks; "
        "no node has more than 2"
    )
    assert not Cluster.objects.filter(owner=alice).exists()  # nothing was queued
    assert (
        api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json").status_code
        == 202
    )
