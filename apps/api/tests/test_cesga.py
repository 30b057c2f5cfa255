"""The CESGA-compatible surface: paths, status codes and JSON shapes of bigdatacesga/paas."""

import pytest
from rest_framework.test import APIClient

from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node

from .conftest import PERSONAS, make_cluster

BASE = "/bigdata/api/v1"
READ = {
    "anonymous": 401,
    "owner": 200,
    "other": 200,
    "read_only": 200,
    "expired": 401,
    "revoked": 401,
    "admin": 200,
}
OWN = {**READ, "other": 404}
ACT = {**OWN, "read_only": 403}


@pytest.fixture
def cluster(alice, demo) -> Cluster:
    return make_cluster(alice, demo, name="web", size=1)


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(
    "path",
    [
        "/products",
        "/products/demo/1.0",
        "/products/demo/1.0/options",
        "/clusters",
        "/clusters/alice",
        "/clusters/alice/demo",
        "/clusters/alice/demo/1.0",
    ],
)
def test_reads_need_a_valid_token(cesga, demo, persona, path):
    assert cesga(persona).get(BASE + path).status_code == READ[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_versions_of_a_product_are_open_as_in_cesga(cesga, demo, persona):
    response = cesga(persona).get(f"{BASE}/products/demo")
    assert response.status_code == 200 and response.json() == {"versions": ["1.0"]}


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("suffix", ["", "/nodes", "/services"])
def test_a_cluster_is_seen_only_by_its_owner_and_admins(cesga, cluster, persona, suffix):
    path = f"{BASE}/clusters/alice/demo/1.0/{cluster.id}{suffix}"
    assert cesga(persona).get(path).status_code == OWN[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_launch_job_is_followed_only_by_its_owner(cesga, cluster, persona):
    response = cesga(persona).get(f"{BASE}/queue/{cluster.id}")
    assert response.status_code == {**OWN, "owner": 303, "read_only": 303, "admin": 303}[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_launch_needs_a_full_token(cesga, demo, persona):
    response = cesga(persona).post(f"{BASE}/products/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == {**ACT, "owner": 202, "other": 202, "admin": 202}[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_delete_needs_the_owner_or_an_admin(cesga, cluster, persona):
    response = cesga(persona).delete(f"{BASE}/clusters/alice/demo/1.0/{cluster.id}")
    assert response.status_code == ACT[persona]


@pytest.mark.parametrize(
    "persona, message",
    [
        ("anonymous", "no token has been provided"),
        ("expired", "token has expired"),
        ("revoked", "please provide a valid authentication token"),
    ],
)
def test_unauthorized_bodies_match_cesga(cesga, persona, message):
    response = cesga(persona).get(f"{BASE}/products")
    assert response.json() == {"status": 401, "error": "unauthorized", "message": message}


def test_garbage_tokens_are_unauthorized(db):
    response = APIClient().get(f"{BASE}/products", HTTP_X_AUTH_TOKEN="dXNlcg==:x:y:1:abc")
    assert response.status_code == 401
    assert response.json()["message"] == "please provide a valid authentication token"


def test_products_versions_and_options(cesga, demo):
    client = cesga("owner")
    assert "demo" in client.get(f"{BASE}/products").json()["products"]
    info = client.get(f"{BASE}/products/demo/1.0").json()
    assert (info["name"], info["version"]) == ("demo", "1.0") and info["description"]
    options = client.get(f"{BASE}/products/demo/1.0/options").json()
    assert set(options) == {"required", "optional", "advanced", "descriptions"}
    assert options["required"] == {"size": 2}
    assert options["descriptions"]["size"] == "Number of workers"
    assert client.get(f"{BASE}/products/nope/1.0").status_code == 404
    assert client.get(f"{BASE}/products/nope").json() == {"versions": []}


def test_a_user_sees_only_their_own_clusters(cesga, alice, bob, demo):
    mine = make_cluster(alice, demo, name="mine", size=1)
    make_cluster(bob, demo, name="theirs", size=1)
    body = cesga("owner").get(f"{BASE}/clusters").json()
    assert body == {
        "clusters": [
            {
                "result": "success",
                "uri": f"clusters/alice/demo/1.0/{mine.id}",
                "data": {
                    "name": "mine",
                    "dn": f"instances/alice/demo/1.0/{mine.id}",
                    "status": "registered",
                },
            }
        ]
    }
    assert cesga("owner").get(f"{BASE}/clusters/bob").json() == {"clusters": []}
    assert len(cesga("admin").get(f"{BASE}/clusters").json()["clusters"]) == 2
    assert len(cesga("admin").get(f"{BASE}/clusters/bob/demo/1.0").json()["clusters"]) == 1


@pytest.mark.parametrize(
    "state, word",
    [
        ("queued", "registered"),
        ("placing", "scheduling"),
        ("configuring", "configuring"),
        ("running", "ready"),
        ("destroying", "destroyed"),
        ("destroyed", "destroyed"),
        ("stopped", "stopped"),
        ("failed", "failed"),
    ],
)
def test_states_are_given_in_cesga_words(cesga, alice, demo, state, word):
    cluster = make_cluster(alice, demo, state=state, size=1)
    body = cesga("owner").get(f"{BASE}/clusters/alice/demo/1.0/{cluster.id}").json()
    assert body["data"]["status"] == word


def test_placed_containers_make_the_cluster_scheduled(cesga, alice, demo):
    cluster = make_cluster(alice, demo, size=1)
    cluster.instances.update(container_id="abc")
    Cluster.objects.filter(id=cluster.id).update(state="placing")
    body = cesga("owner").get(f"{BASE}/clusters/alice/demo/1.0/{cluster.id}").json()
    assert body["data"]["status"] == "scheduled"


def test_nodes_have_disks_and_networks(cesga, alice, demo):
    make_network()
    node = make_node(cores=8, memory_mb=8192, disks={"hdd": 4})
    cluster = make_cluster(alice, demo, name="web", size=1, disks=2)
    reserve(cluster.id)
    nodes = cesga("owner").get(f"{BASE}/clusters/alice/demo/1.0/{cluster.id}/nodes").json()
    master = nodes["nodes"][0]
    assert (master["name"], master["clustername"], master["host"]) == ("master-0", "web", node.name)
    assert [d["name"] for d in master["disks"]] == ["disk1", "disk2"]
    assert {d["host"] for d in master["disks"]} == {node.name}
    assert master["disks"][0]["destination"] == "/data/1"
    assert master["networks"][0]["address"]
    services = cesga("owner").get(f"{BASE}/clusters/alice/demo/1.0/{cluster.id}/services").json()
    assert services["services"][0] == {
        "name": "master",
        "status": "scheduling",
        "nodes": ["master-0"],
        "ports": [80],
    }


def test_delete_answers_success(cesga, alice, demo):
    cluster = make_cluster(alice, demo, state="running", size=1)
    path = f"{BASE}/clusters/alice/demo/1.0/{cluster.id}"
    response = cesga("owner").delete(path)
    assert response.status_code == 200 and response.json() == {"message": "success"}
    assert cesga("owner").get(path).json()["data"]["status"] == "destroyed"


def test_launch_errors_keep_the_cesga_body(cesga, demo):
    response = cesga("owner").post(f"{BASE}/products/demo/1.0", {"size": 100}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert (body["status"], body["error"]) == (400, "bad request")
    assert "size" in body["fields"]
    assert cesga("owner").post(f"{BASE}/products/demo/9.9", {}, format="json").status_code == 404


def test_a_body_without_json_content_type_is_read_as_json(cesga, demo):
    # curl -d '{"size": 1}' without -H sends application/x-www-form-urlencoded.
    response = cesga("owner").post(
        f"{BASE}/products/demo/1.0",
        '{"size": 1}',
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 202
    cluster = Cluster.objects.get()
    assert cluster.options == {"size": 1}
