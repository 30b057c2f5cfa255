"""The CESGA flows of bigdatacesga/paas README.md and commands.md, as those scripts make them:
plain HTTP (requests, like curl/httpie) against a live server, x-auth-token header."""

import json

import pytest
import requests

from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_roomy_node

from .conftest import token_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(live_server, alice):
    load_catalog()
    make_roomy_node()  # a launch on an empty pool is refused
    http = requests.Session()
    http.headers["x-auth-token"] = token_for(alice)
    http.base = f"{live_server.url}/bigdata/api/v1"
    yield http
    http.close()


def test_the_cesga_script_flow_works_unchanged(session):
    base = session.base
    # curl -H "$AUTH" http://paas:6000/bigdata/api/v1/products
    products = session.get(f"{base}/products")
    assert products.status_code == 200 and "demo" in products.json()["products"]
    assert session.get(f"{base}/products/demo").json() == {"versions": ["1.0"]}
    assert session.get(f"{base}/products/demo/1.0").json()["name"] == "demo"
    assert "size" in session.get(f"{base}/products/demo/1.0/options").json()["required"]

    # curl -X POST …/products/example/0.1.0 -d '{"size": 1}' -H "Content-type: application/json"
    launched = session.post(
        f"{base}/products/demo/1.0",
        data=json.dumps({"size": 1}),
        headers={"Content-type": "application/json"},
        allow_redirects=False,
    )
    assert launched.status_code == 202
    job = launched.headers["Location"]
    assert launched.json() == {"url": job} and "/bigdata/api/v1/queue/" in job

    # "If no options are provided an empty json dict must be provided"
    empty = session.post(
        f"{base}/products/demo/1.0", data="{}", headers={"Content-type": "application/json"}
    )
    assert empty.status_code == 202

    # Follow the job: 303 to the cluster, as a script polling /queue/<id> sees it.
    followed = session.get(job, allow_redirects=False)
    assert followed.status_code == 303
    cluster_url = followed.headers["Location"]
    assert followed.json() == {"status": "registered", "url": cluster_url}
    cluster = Cluster.objects.get(id=int(cluster_url.rsplit("/", 1)[1]))
    assert cluster_url.endswith(f"/clusters/alice/demo/1.0/{cluster.id}")
    assert cluster.options == {"size": 1} and cluster.instances.count() == 2

    # requests follows the 303 with a GET, keeping the token: the cluster itself.
    landed = session.get(job)
    assert landed.status_code == 200 and landed.json()["data"]["dn"].startswith("instances/")

    # http GET …/clusters/test/example/0.1.0/1
    got = session.get(cluster_url).json()
    assert got["result"] == "success" and got["data"]["status"] == "registered"
    listed = session.get(f"{base}/clusters/alice/demo/1.0").json()["clusters"]
    assert len(listed) == 2
    nodes = session.get(f"{cluster_url}/nodes").json()["nodes"]
    assert [n["name"] for n in nodes] == ["master-0", "worker-0"]

    # http DELETE …/clusters/test/example/0.1.0/1
    deleted = session.delete(cluster_url)
    assert deleted.status_code == 200 and deleted.json() == {"message": "success"}
    assert session.get(cluster_url).json()["data"]["status"] == "destroyed"


def test_a_script_without_a_token_is_told_so(session):
    response = requests.get(f"{session.base}/clusters", timeout=10)
    assert response.status_code == 401
    assert response.json() == {
        "status": 401,
        "error": "unauthorized",
        "message": "no token has been provided",
    }
