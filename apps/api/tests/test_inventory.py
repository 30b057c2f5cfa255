"""Admin only: nodes (capacity, free, drain/undrain), disks (state, holder), quotas."""

import pytest

from apps.accounts.models import Quota
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node

from .conftest import PERSONAS, make_cluster

ADMIN_READ = {
    "anonymous": 401,
    "owner": 403,
    "other": 403,
    "read_only": 403,
    "expired": 401,
    "revoked": 401,
    "admin": 200,
}


@pytest.fixture
def node(db):
    make_network()
    return make_node(cores=8, memory_mb=8192, disks={"hdd": 3, "ssd": 1})


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(
    "path", ["/api/v1/nodes", "/api/v1/nodes/{id}", "/api/v1/disks", "/api/v1/quotas"]
)
def test_only_admins_see_the_pool(api, node, persona, path):
    assert api(persona).get(path.format(id=node.id)).status_code == ADMIN_READ[persona]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("verb", ["drain", "undrain"])
def test_only_admins_drain_nodes(api, node, persona, verb):
    response = api(persona).post(f"/api/v1/nodes/{node.id}/{verb}")
    assert response.status_code == ADMIN_READ[persona]


@pytest.mark.parametrize("persona", PERSONAS)
def test_only_admins_set_quotas(api, bob, persona):
    response = api(persona).post("/api/v1/quotas", {"user": "bob", "max_cores": 4}, format="json")
    assert response.status_code == {**ADMIN_READ, "admin": 201}[persona]


def test_nodes_show_capacity_and_what_is_free(api, node, alice, demo):
    reserve(make_cluster(alice, demo, size=1, cpu=2, mem=128).id)
    body = api("admin").get(f"/api/v1/nodes/{node.id}").json()
    assert (body["cores"], body["cores_free"]) == (8, 4)
    assert (body["memory_mb"], body["memory_free_mb"]) == (8192, 8192 - 256)
    assert body["disks"] == {"hdd": {"total": 3, "free": 1}, "ssd": {"total": 1, "free": 1}}
    assert "tls_dir" not in body


def test_drain_and_undrain_change_the_node_state(api, node):
    assert api("admin").post(f"/api/v1/nodes/{node.id}/drain").json()["state"] == "draining"
    assert api("admin").get("/api/v1/nodes?state=draining").json()["count"] == 1
    assert api("admin").post(f"/api/v1/nodes/{node.id}/undrain").json()["state"] == "active"


def test_disks_show_their_holder(api, node, alice, demo):
    cluster = make_cluster(alice, demo, name="web", size=1)
    reserve(cluster.id)
    body = api("admin").get(f"/api/v1/disks?node={node.name}&kind=hdd").json()
    held = [d for d in body["results"] if d["holder"]]
    assert len(held) == 2 and body["count"] == 3
    assert {d["holder"]["instance"] for d in held} == {"master-0", "worker-0"}
    assert held[0]["holder"]["cluster"] == cluster.id and held[0]["holder"]["owner"] == "alice"
    assert api("admin").get("/api/v1/disks?state=allocated").json()["count"] == 2


def test_admins_manage_quotas_with_usage(api, bob):
    created = api("admin").post("/api/v1/quotas", {"user": "bob", "max_cores": 4}, format="json")
    assert created.status_code == 201 and created.json()["used"]["max_cores"] == 0
    quota_id = created.json()["id"]
    response = api("admin").patch(f"/api/v1/quotas/{quota_id}", {"max_cores": 6}, format="json")
    assert response.json()["max_cores"] == 6 and Quota.objects.get(user=bob).max_cores == 6
    both = api("admin").post("/api/v1/quotas", {"max_cores": 1}, format="json")
    assert both.status_code == 400 and "user" in both.json()["fields"]
    assert api("admin").delete(f"/api/v1/quotas/{quota_id}").status_code == 204
