"""The services API of CESGA's later web UI: paths and shapes of bigdatacesga/web-ui and
paas' services endpoints, on Platter's products and clusters, with the same permissions."""

import pytest

from apps.clusters.models import Cluster

from .cesga_product import BASE, register
from .conftest import PERSONAS, make_cluster

READ = {
    "anonymous": 401,
    "owner": 200,
    "other": 200,
    "read_only": 200,
    "expired": 401,
    "revoked": 401,
    "admin": 200,
}


@pytest.fixture
def cluster(alice, demo) -> Cluster:
    return make_cluster(alice, demo, name="web", size=1)


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(
    "path",
    [
        "/services",
        "/services/",
        "/services/demo/1.0",
        "/instances",
        "/instances/alice",
        "/instances/alice/demo/1.0",
    ],
)
def test_reads_need_a_valid_token(cesga, demo, persona, path):
    assert cesga(persona).get(BASE + path).status_code == READ[persona]


def test_services_list_their_versions_and_options(cesga, demo):
    client = cesga("owner")
    listed = client.get(f"{BASE}/services").json()
    assert "demo" in listed["services"] and listed["products"] == listed["services"]
    assert client.get(f"{BASE}/services/demo").json() == {"versions": ["1.0"]}
    detail = client.get(f"{BASE}/services/demo/1.0").json()
    assert (detail["name"], detail["version"], detail["title"]) == ("demo", "1.0", "Demo cluster")
    assert detail["options"]["required"] == {"size": 2}
    assert detail["options"]["descriptions"]["size"] == "Number of workers"
    assert client.get(f"{BASE}/services/demo/9.9").status_code == 404


def test_a_registered_service_shows_its_logo(cesga, catalog):
    register(cesga("admin"))
    detail = cesga("owner").get(f"{BASE}/services/tiny/1.0").json()
    assert detail["logo_url"] == "https://example.org/tiny.png"
    assert detail["options"]["advanced"] == {"disks": 2, "greeting": "hello"}


def test_a_launch_answers_the_instance_path(cesga, demo, alice):
    response = cesga("owner").post(f"{BASE}/services/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == 201, response.content
    cluster = Cluster.objects.get(owner=alice)
    assert response.json() == f"instances/alice/demo/1.0/{cluster.id}"
    assert response["Location"].endswith(f"{BASE}/instances/alice/demo/1.0/{cluster.id}")
    shown = cesga("owner").get(response["Location"]).json()
    assert shown["data"]["status"] == "registered"


@pytest.mark.parametrize("persona, code", [("read_only", 403), ("anonymous", 401)])
def test_a_launch_needs_a_full_token(cesga, demo, persona, code):
    response = cesga(persona).post(f"{BASE}/services/demo/1.0", {"size": 1}, format="json")
    assert response.status_code == code


def test_a_bad_launch_names_the_option(cesga, demo):
    response = cesga("owner").post(f"{BASE}/services/demo/1.0", {"size": 99}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["size"]


def test_a_user_sees_only_their_own_instances_unless_staff(cesga, cluster):
    uri = f"clusters/alice/demo/1.0/{cluster.id}"
    own = cesga("owner").get(f"{BASE}/instances/alice/demo/1.0").json()
    assert [i["uri"] for i in own["instances"]] == [uri] and own["clusters"] == own["instances"]
    assert own["instances"][0]["data"]["dn"] == f"instances/alice/demo/1.0/{cluster.id}"
    assert cesga("other").get(f"{BASE}/instances/alice").json()["instances"] == []
    assert cesga("other").get(f"{BASE}/instances").json()["instances"] == []
    assert [i["uri"] for i in cesga("admin").get(f"{BASE}/instances").json()["instances"]] == [uri]
    for suffix in ("", "/nodes", "/services"):
        path = f"{BASE}/instances/alice/demo/1.0/{cluster.id}{suffix}"
        assert cesga("owner").get(path).status_code == 200
        assert cesga("other").get(path).status_code == 404


@pytest.mark.parametrize(
    "persona, code",
    [("owner", 200), ("admin", 200), ("other", 404), ("read_only", 403), ("anonymous", 401)],
)
def test_delete_by_type_name_and_id(cesga, cluster, persona, code):
    response = cesga(persona).delete(f"{BASE}/services/?type=multi&name=demo&id={cluster.id}")
    assert response.status_code == code
    cluster.refresh_from_db()
    if code == 200:
        assert response.json() == {"result": "success"}
        assert cluster.state in (Cluster.State.DESTROYING, Cluster.State.DESTROYED)
    else:
        assert cluster.state == Cluster.State.QUEUED


def test_delete_names_what_it_needs(cesga, cluster):
    response = cesga("owner").delete(f"{BASE}/services?type=multi&name=demo")
    assert response.status_code == 400
    assert response.json()["message"] == "give the instance as ?name=<service>&id=<instance id>"
    wrong = cesga("owner").delete(f"{BASE}/services?type=multi&name=spark&id={cluster.id}")
    assert wrong.status_code == 404


def test_delete_by_instance_path(cesga, cluster):
    path = f"{BASE}/instances/alice/demo/1.0/{cluster.id}"
    assert cesga("other").delete(path).status_code == 404
    response = cesga("owner").delete(path)
    assert response.status_code == 200 and response.json() == {"message": "success"}
    cluster.refresh_from_db()
    assert cluster.state in (Cluster.State.DESTROYING, Cluster.State.DESTROYED)


def test_register_through_the_services_paths(cesga, catalog):
    admin = cesga("admin")
    created = admin.post(f"{BASE}/services", {"name": "viaservices", "version": "1"}, format="json")
    assert created.status_code == 201 and created.json()["missing"] == ["template", "options"]
    assert (
        cesga("owner")
        .post(f"{BASE}/services", {"name": "x", "version": "1"}, format="json")
        .status_code
        == 403
    )
    stored = admin.put(
        f"{BASE}/services/viaservices/1/orquestrator", "run()", content_type="text/plain"
    )
    assert stored.status_code == 200
    assert admin.get(f"{BASE}/products/viaservices/1/orchestrator").json() == {
        "orchestrator": "run()"
    }
