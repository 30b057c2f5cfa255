"""POST /api/v1/clusters/<id>/notebook: who may, its refusals in the API's error body, and
the cluster's `notebook` state."""

import pytest

from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.factories import make_network, make_node
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
def pool(catalog):
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4, "ssd": 4})
    with FakeNodes():
        yield


@pytest.fixture
def spark(alice, pool):
    return running(alice, "spark", size=1, mem=1024)


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_owner_and_admins_add_a_notebook(api, spark, persona):
    response = api(persona).post(f"/api/v1/clusters/{spark.id}/notebook")
    assert response.status_code == ACT[persona]
    if response.status_code == 202:
        body = response.json()
        assert body["state"] == "resizing"
        assert body["notebook"]["state"] == "adding"
        assert body["notebook"]["hostname"] == "notebook-0"


def test_refusals_are_conflicts_naming_why(api, alice, spark, settings):
    path = f"/api/v1/clusters/{spark.id}/notebook"
    assert api("owner").get(f"/api/v1/clusters/{spark.id}").json()["notebook"] is None
    assert api("owner").post(path).status_code == 202
    again = api("owner").post(path)
    assert again.status_code == 409 and "resizing" in again.json()["message"]
    Cluster.objects.filter(id=spark.id).update(state="running")
    already = api("owner").post(path)
    assert already.status_code == 409 and "has a notebook already" in already.json()["message"]

    demo = running(alice, "demo", size=1, mem=64)
    other = api("owner").post(f"/api/v1/clusters/{demo.id}/notebook")
    assert other.status_code == 409 and "only Spark clusters" in other.json()["message"]

    full = running(alice, "spark", size=1, mem=1024)
    in_use = Instance.objects.filter(cluster__owner=alice, active=True).count()
    settings.SCHEDULER_DEFAULT_QUOTA = {"max_instances": in_use}
    over = api("owner").post(f"/api/v1/clusters/{full.id}/notebook")
    assert over.status_code == 403 and over.json()["error"] == "quota_exceeded"
    assert over.json()["quota"]["limit"] == "max_instances"


def test_the_schema_has_it(api, spark):
    schema = api("owner").get("/api/v1/schema/?format=json").json()
    post = schema["paths"]["/api/v1/clusters/{id}/notebook"]["post"]
    assert {"202", "403", "409"} <= set(post["responses"])
    assert "notebook" in schema["components"]["schemas"]["ClusterDetail"]["properties"]
