"""POST /api/v1/clusters/<id>/resize: who may, and refusals in the API's error body."""

import pytest

from apps.clusters.models import Cluster
from apps.nodes.fake import FakeNodes
from workers.tests.fake_launch import running

from .conftest import PERSONAS

pytestmark = pytest.mark.django_db(transaction=True)
ACT = {
    "anonymous": 401,
    "owner": 202,
    "other": 404,
    "read_only": 403,
    "expired": 401,
    "revoked": 401,
    "admin": 202,
}


@pytest.fixture
def demo_cluster(alice, catalog):
    from apps.clusters.tests.factories import make_network, make_node

    make_network()
    for _ in range(2):
        make_node(disks={"hdd": 4})
    with FakeNodes():
        yield running(alice, "demo", size=1, mem=64)


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_owner_and_admins_resize(api, demo_cluster, persona):
    response = api(persona).post(
        f"/api/v1/clusters/{demo_cluster.id}/resize", {"workers": 2}, format="json"
    )
    assert response.status_code == ACT[persona]
    if response.status_code == 202:
        assert response.json()["state"] == "resizing"


def test_refusals_name_why(api, demo_cluster):
    path = f"/api/v1/clusters/{demo_cluster.id}/resize"
    bad = api("owner").post(path, {"workers": 20}, format="json")
    assert bad.status_code == 400
    assert bad.json()["fields"]["workers"] == "role worker allows 1 to 8 instances; asked 20"
    missing = api("owner").post(path, {}, format="json")
    assert missing.status_code == 400
    assert missing.json()["fields"] == {"workers": "give workers, or role with cores or memory_mb"}
    Cluster.objects.filter(id=demo_cluster.id).update(state="stopped")
    conflict = api("owner").post(path, {"workers": 2}, format="json")
    assert conflict.status_code == 409 and "only a running cluster" in conflict.json()["message"]


def test_the_long_path_resizes_too_and_the_schema_has_it(api, demo_cluster):
    long = f"/api/v1/clusters/alice/demo/1.0/{demo_cluster.id}/resize"
    assert api("owner").post(long, {"workers": 2}, format="json").status_code == 202
    schema = api("owner").get("/api/v1/schema/?format=json").json()
    assert any(path.endswith("/resize") for path in schema["paths"])


def test_a_role_gets_new_cores_and_refusals_name_the_field(api, demo_cluster):
    path = f"/api/v1/clusters/{demo_cluster.id}/resize"
    both = api("owner").post(path, {"workers": 2, "role": "worker", "cores": 2}, format="json")
    assert both.status_code == 400 and "not both" in both.json()["fields"]["workers"]
    nothing = api("owner").post(path, {"role": "worker"}, format="json")
    assert nothing.json()["fields"]["cores"] == "give new cores, memory_mb or both for the workers"
    big = api("owner").post(path, {"role": "worker", "cores": 64}, format="json")
    assert big.status_code == 400
    assert big.json()["fields"] == {"cores": "a worker of demo 1.0 may have 1 to 2 cores; asked 64"}
    role = api("owner").post(path, {"role": "ghost", "cores": 2}, format="json")
    assert "its roles are master, worker" in role.json()["fields"]["role"]
    asked = api("owner").post(path, {"role": "worker", "cores": 2}, format="json")
    assert asked.status_code == 202 and asked.json()["state"] == "resizing"
    assert [i.cores for i in demo_cluster.instances.filter(role="worker", active=True)] == [2]
