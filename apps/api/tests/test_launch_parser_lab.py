"""The launch parser on the real lab: CESGA's launch call starts the demo and the REST API
starts Spark, each body written as a script or a form sends it (numbers as strings), read by
apps.clusters.launch_requests.parse_launch; both clusters run on the lab's nodes and are
destroyed."""

import pytest

from apps.catalog.images import missing_images
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def run_and_destroy(cluster_id: int, seconds: float) -> Cluster:
    running = wait_for(cluster_id, S.RUNNING, seconds=seconds)
    instances = list(running.instances.all())
    assert all(i.container_id and i.node_id and i.state == "running" for i in instances)
    services.request_destroy(cluster_id, keep_data=False)
    wait_for(cluster_id, S.DESTROYED, seconds=120)
    return running


def test_the_demo_by_cesga_and_spark_by_the_api_launch_through_the_parser(
    dispatching, lab_cleanup, api, cesga, alice
):
    load_catalog()
    spark = ProductVersion.objects.get(product__name="spark")
    assert missing_images(spark) == [], "lab up builds every product image"

    response = cesga("owner").post(
        "/bigdata/api/v1/products/demo/1.0", {"size": "1", "disks": "1"}, format="json"
    )
    assert response.status_code == 202, response.content
    demo = Cluster.objects.get(owner=alice, version__product__name="demo")
    assert demo.options == {"size": 1, "disks": 1}  # read as numbers by the parser
    running = run_and_destroy(demo.id, seconds=180)
    assert sorted(i.role for i in running.instances.all()) == ["master", "worker"]

    response = api("owner").post(
        f"/api/v1/products/spark/{spark.version}",
        {"name": "parsed", "size": "1", "lease": "2", "disk_kind": "hdd"},
        format="json",
    )
    assert response.status_code == 202, response.content
    cluster = Cluster.objects.get(id=response.json()["id"])
    assert cluster.name == "parsed" and cluster.expires_at is not None
    assert cluster.options == {"size": 1, "disk_kind": "hdd"}
    running = run_and_destroy(cluster.id, seconds=300)
    assert sorted(i.role for i in running.instances.all()) == ["master", "worker"]
    assert {i.disk_kind for i in running.instances.all()} == {"hdd"}
