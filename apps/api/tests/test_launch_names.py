"""A launch whose name the owner already uses is refused with a 400 naming the field, in the
API's error body and in CESGA's; launches without a name get a free one."""

from apps.clusters.models import Cluster

from .conftest import make_cluster

BASE = "/bigdata/api/v1"


def test_the_api_refuses_a_name_in_use_naming_the_field(api, demo, alice):
    make_cluster(alice, demo, name="web", size=1)
    response = api("owner").post("/api/v1/products/demo/1.0", {"name": "web"}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "status": 400,
        "error": "name_taken",
        "message": "you already have a cluster named web",
        "fields": {"name": "you already have a cluster named web"},
    }
    assert Cluster.objects.filter(owner=alice).count() == 1


def test_another_user_and_a_destroyed_cluster_do_not_hold_the_name(api, demo, alice, bob):
    make_cluster(bob, demo, name="web", size=1)
    make_cluster(alice, demo, "destroyed", name="web", size=1)
    response = api("owner").post("/api/v1/products/demo/1.0", {"name": "web"}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["name"] == "web"


def test_cesga_refuses_a_name_in_use_in_its_error_body(cesga, demo, alice):
    make_cluster(alice, demo, name="web", size=1)
    response = cesga("owner").post(f"{BASE}/products/demo/1.0", {"name": "web"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert (body["status"], body["error"]) == (400, "bad request")
    assert body["message"] == "you already have a cluster named web"
    assert body["fields"] == {"name": "you already have a cluster named web"}


def test_a_launch_without_a_name_skips_names_in_use(api, demo, alice):
    make_cluster(alice, demo, name="demo-1", size=1)
    make_cluster(alice, demo, name="demo-2", size=1)
    make_cluster(alice, demo, name="demo-4", size=1)
    names = [
        api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json").json()["name"]
        for _ in range(2)
    ]
    # Three clusters of demo: the default starts at demo-4, which is taken.
    assert names == ["demo-5", "demo-6"]
